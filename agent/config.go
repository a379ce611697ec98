// Package agent is nodekit's node agent as a library: the kubelet (node registration and heartbeats,
// pods over CRI, the :10250 server, probes, static pods) on nodekit's managed containerd or an existing
// CRI runtime, nodekit-cni's install and conflist, and the service proxy, assembled by Run from one
// typed Config. `nodekit agent` binds its flags to a Config (BindFlags) and calls Run; `nodekit up` and
// `nodekit lab` start it through Config.Args; tests and benchmarks call Run in-process. This is the
// k3s pkg/agent shape: the assembly lives in a library, the command only parses flags.
package agent

import (
	"log/slog"
	"path/filepath"

	"github.com/containernetworking/plugins/pkg/ns"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	cniconfig "github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/vxlan"
	"github.com/nodekit/nodekit/internal/localpath"
	"github.com/nodekit/nodekit/internal/podnet"
	"github.com/nodekit/nodekit/kubelet"
	kubeletconfig "github.com/nodekit/nodekit/kubelet/config"
	"github.com/nodekit/nodekit/kubelet/metrics"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/runtime/containerd"
)

// Defaults of the settings that are not derived from the data dir.
const (
	// DefaultDataDir is --data-dir's default: the agent's persistent state (see Paths).
	DefaultDataDir = "/var/lib/nodekit"
	// DefaultClusterCIDR is the cluster's pod network every node's podCIDR is cut from (the server's
	// --cluster-cidr default: internal/podnet's, shared by both halves).
	DefaultClusterCIDR = podnet.DefaultClusterCIDR
	// DefaultCNIConfDir is where the agent writes its conflist (the directory containerd's CRI reads).
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultProxyMetricsAddr is the service proxy's /metrics address (kube-proxy's).
	DefaultProxyMetricsAddr = "127.0.0.1:10249"
	// DefaultGoMemoryLimit is --go-memory-limit's default: none. BenchmarkAgentMemory's figures
	// (docs/performance.md) show no resident memory gained at 110 pods with 40Mi, while a limit near the
	// live heap makes the collector run continuously in bursts (image import, a node fill, thousands of
	// Services in the proxy); operators of small nodes set one.
	DefaultGoMemoryLimit = ""
	// DefaultProxyHealthzAddr is the service proxy's /healthz and /livez address (kube-proxy's).
	DefaultProxyHealthzAddr = "0.0.0.0:10256"
)

// Command is the nodekit subcommand that runs the agent (Args' first element).
const Command = "agent"

// Config is every setting of the node agent. Default() gives the defaults; a zero path field means the
// data-dir location Paths() documents. The fields down to Kubelet are the command line's (Args renders
// them, BindFlags parses them); the hooks after it are for in-process callers only.
type Config struct {
	// DataDir holds the agent's persistent state (--data-dir; see Paths).
	DataDir string
	// Server is the API server URL (--server), overriding the kubeconfig's; required with Token.
	Server string
	// Kubeconfig holds the node's credentials, system:node:<name> (--kubeconfig); written by the join
	// when Token is set and it is not valid yet.
	Kubeconfig string
	// NodeName is the Node's name (--node-name); empty: the hostname, lowercased.
	NodeName string
	// NodeIP is the node's InternalIP (--node-ip); empty: the address of the default-route interface.
	NodeIP string
	// NodeLabels are added to the Node at registration (--node-labels key=value,...).
	NodeLabels map[string]string
	// RootDir is the kubelet's state directory (--root-dir); empty: Paths().KubeletRoot.
	RootDir string
	// CNIBinDir is where nodekit-cni is installed for the managed containerd (--cni-bin-dir); empty:
	// Paths().CNIBin. containerd.DefaultCNIBinDirs are searched after it. With an external runtime
	// (ContainerRuntimeEndpoint) it names that runtime's CNI plugin dir: the agent then checks the
	// network's plugins there (CNI STATUS, in the node's Ready condition) and runs CNI GC with them.
	CNIBinDir string
	// ContainerdConfig is an external containerd 1.x's config file (--containerd-config), read for its
	// cgroup driver (SystemdCgroup) because its CRI has no RuntimeConfig; empty:
	// containerd.DefaultConfigPath. Unused with the managed containerd and with containerd >= 2.0.
	ContainerdConfig string
	// CNIConfDir is where the conflist is written once the Node has a podCIDR (--cni-conf-dir).
	CNIConfDir string
	// ClusterCIDR is the cluster's pod network, containing every node's podCIDR (--cluster-cidr).
	ClusterCIDR string
	// ImagesDir holds the OCI image archives imported into the managed containerd at start
	// (--images-dir); empty: Paths().Images.
	ImagesDir string
	// Token (a bootstrap token <id>.<secret>) and CAHash (sha256:<hex> of the cluster CA's public key)
	// join the cluster when Kubeconfig is not valid yet (--token, --ca-hash; default $NODEKIT_TOKEN and
	// $NODEKIT_CA_HASH, read by Run, so the token need not appear on a command line).
	Token, CAHash string
	// NetworkBackend is how pods reach pods on other nodes (--network-backend, podroutes.Backends): host-gw
	// (default) and vxlan run the route controller (podroutes) with that backend in the agent's network
	// namespace; none runs none, leaving the podCIDRs to the operator's routing (`nodekit down` removes the
	// routes and the VXLAN device the others made).
	NetworkBackend string
	// VXLANVNI and VXLANPort are the vxlan backend's VXLAN network identifier and UDP port (--vxlan-vni,
	// --vxlan-port; default 1 and 8472, flannel's); every node of the cluster needs the same.
	VXLANVNI, VXLANPort int
	// DisableProxy turns the service proxy off (--disable-proxy), when another kube-proxy serves the node.
	DisableProxy bool
	// ProxyMode is the service proxy's backend (--proxy-mode): iptables, ipvs or nftables.
	ProxyMode proxy.Mode
	// ProxyMetricsAddr is the proxy's /metrics and /debug/services host:port (--proxy-metrics-bind-address);
	// empty disables them.
	ProxyMetricsAddr string
	// GoMemoryLimit is the Go runtime's soft memory limit Run sets (--go-memory-limit, a quantity:
	// runtime/debug.SetMemoryLimit) unless $GOMEMLIMIT is set; "0" or empty sets none. It is process-wide:
	// in-process callers that host more than the agent (tests) leave it empty.
	GoMemoryLimit string
	// ProxyHealthzAddr is the proxy's /healthz and /livez host:port (--proxy-healthz-bind-address); empty
	// disables them.
	ProxyHealthzAddr string
	// ComponentPods makes the kubelet publish the component process records of Paths().Components
	// (internal/components) as mirror pods in kube-system (kubelet/processpods) and serve their logs;
	// the agent writes its own service proxy's record (kube-proxy) there, the proxy then also logging to
	// Paths().ProxyLog (--component-pods, default true). A server on the same data dir writes etcd's, the
	// API server's, the scheduler's and the controller manager's.
	ComponentPods bool
	// KubeletConfigFile is the KubeletConfiguration file (--config) Kubelet was resolved from, if any.
	KubeletConfigFile string
	// Kubelet is the effective KubeletConfiguration (kubelet/config: defaults, the file, the kubelet
	// flags). Args renders the fields that have a flag; the others reach a child only through
	// KubeletConfigFile.
	Kubelet kubeletv1beta1.KubeletConfiguration

	// Logger receives the kubelet's and the prober's events; nil: slog.Default().
	Logger *slog.Logger `json:"-"`
	// ProbeManager replaces the probe manager (kubelet/prober) when set.
	ProbeManager kubelet.ProbeManager `json:"-"`
	// Metrics receives the kubelet's metrics (served on the kubelet server's /metrics); nil: new ones.
	Metrics *metrics.Metrics `json:"-"`
	// TuneKubelet, when set, adjusts the in-process kubelet's settings that have no flag (periods and
	// back-offs shortened by tests) before it is built.
	TuneKubelet func(*kubelet.Config) `json:"-"`
	// TuneProxy, when set, adjusts the service proxy's settings that have no agent flag (sync periods, the
	// network namespace its rules go to: tests run a node's proxy in a namespace of their own) before it
	// is built.
	TuneProxy func(*proxy.Config) `json:"-"`
	// OnKubelet, when set, is called with the kubelet once it is built, before it runs.
	OnKubelet func(*kubelet.Kubelet) `json:"-"`
	// ProxyNetNS, when set, is the network namespace the service proxy writes its rules in (benchmarks
	// run a whole agent, proxy included, without touching the host's tables); nil: the agent's own.
	ProxyNetNS ns.NetNS `json:"-"`
}

// Default returns the agent's defaults: DataDir, CNIConfDir, ClusterCIDR, the proxy's iptables mode and
// metrics address, and kubelet/config's Default() KubeletConfiguration.
func Default() Config {
	return Config{
		DataDir:          DefaultDataDir,
		CNIConfDir:       DefaultCNIConfDir,
		ClusterCIDR:      DefaultClusterCIDR,
		ProxyMode:        proxy.ModeIPTables,
		NetworkBackend:   podroutes.BackendHostGW,
		VXLANVNI:         vxlan.DefaultVNI,
		VXLANPort:        vxlan.DefaultPort,
		ProxyMetricsAddr: DefaultProxyMetricsAddr,
		GoMemoryLimit:    DefaultGoMemoryLimit,
		ProxyHealthzAddr: DefaultProxyHealthzAddr,
		ComponentPods:    true,
		Kubelet:          *kubeletconfig.Default(),
	}
}

// Paths is the agent's on-disk layout, every path absolute when DataDir is.
type Paths struct {
	// DataDir is Config.DataDir.
	DataDir string
	// Containerd is the managed containerd's directory (<DataDir>/containerd): config.toml, root,
	// state, socket; ContainerdLog its log file and ContainerdSocket its gRPC socket in it.
	Containerd, ContainerdLog, ContainerdSocket string
	// Images holds the image archives imported at start (ImagesDir, default <DataDir>/images).
	Images string
	// CNI is nodekit-cni's IPAM store (<DataDir>/cni); CNIBin the plugin's install directory
	// (CNIBinDir, default <DataDir>/cni/bin); CNICache libcni's cache for the agent's own CNI calls
	// (STATUS and GC, <DataDir>/cni/cache).
	CNI, CNIBin, CNICache string
	// Conflist is the conflist the agent writes (<CNIConfDir>/10-nodekit.conflist).
	Conflist string
	// KubeletRoot is the kubelet's state (RootDir, default <DataDir>/kubelet); KubeletPKI the kubelet
	// server's self-signed certificate in it (<KubeletRoot>/pki).
	KubeletRoot, KubeletPKI string
	// Storage holds the local-path PersistentVolumes of this node, one directory per volume
	// (<DataDir>/storage, published as the Node's localpath.NodeDirAnnotation).
	Storage string
	// Components is the component process records directory of the node (<DataDir>/components, the
	// server's too on a shared data dir); ProxyLog the service proxy's own log file
	// (<DataDir>/logs/kube-proxy.log), written with ComponentPods.
	Components, ProxyLog string
}

// Paths returns the layout of c's data dir, with the explicit directories (RootDir, CNIBinDir,
// ImagesDir, CNIConfDir) where they are set.
func (c Config) Paths() Paths {
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	confDir := or(c.CNIConfDir, DefaultCNIConfDir)
	p := Paths{
		DataDir:     c.DataDir,
		Containerd:  containerd.DirIn(c.DataDir),
		Images:      or(c.ImagesDir, filepath.Join(c.DataDir, "images")),
		CNI:         filepath.Join(c.DataDir, "cni"),
		CNIBin:      or(c.CNIBinDir, filepath.Join(c.DataDir, "cni", "bin")),
		CNICache:    filepath.Join(c.DataDir, "cni", "cache"),
		Conflist:    filepath.Join(confDir, filepath.Base(cniconfig.DefaultPath)),
		KubeletRoot: or(c.RootDir, filepath.Join(c.DataDir, "kubelet")),
		Storage:     filepath.Join(c.DataDir, localpath.DirName),
		Components:  filepath.Join(c.DataDir, "components"),
		ProxyLog:    filepath.Join(c.DataDir, "logs", "kube-proxy.log"),
	}
	p.ContainerdLog = filepath.Join(p.Containerd, "containerd.log")
	p.ContainerdSocket = containerd.SocketPath(p.Containerd)
	p.KubeletPKI = filepath.Join(p.KubeletRoot, "pki")
	return p
}
