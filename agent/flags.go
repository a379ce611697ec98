package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodekit/nodekit/internal/cli"
	kubeletconfig "github.com/nodekit/nodekit/kubelet/config"
)

// Flag names of the agent's own settings (the KubeletConfiguration flags are kubelet/config's).
const (
	FlagDataDir          = cli.FlagDataDir
	FlagServer           = "server"
	FlagKubeconfig       = "kubeconfig"
	FlagNodeName         = "node-name"
	FlagNodeIP           = "node-ip"
	FlagNodeLabels       = "node-labels"
	FlagRootDir          = "root-dir"
	FlagCNIBinDir        = "cni-bin-dir"
	FlagCNIConfDir       = "cni-conf-dir"
	FlagContainerdConfig = "containerd-config"
	FlagClusterCIDR      = "cluster-cidr"
	FlagImagesDir        = "images-dir"
	FlagToken            = "token"
	FlagCAHash           = "ca-hash"
	FlagDisableProxy     = "disable-proxy"
	FlagComponentPods    = "component-pods"
	FlagProxyMode        = "proxy-mode"
	FlagProxyMetricsAddr = "proxy-metrics-bind-address"
	FlagGoMemoryLimit    = "go-memory-limit"
	FlagProxyHealthzAddr = "proxy-healthz-bind-address"
	FlagNetworkBackend   = "network-backend"
	FlagVXLANVNI         = "vxlan-vni"
	FlagVXLANPort        = "vxlan-port"
)

// Flags is a Config bound to a flag set by BindFlags.
type Flags struct {
	cfg     *Config
	kubelet *kubeletconfig.Flags
}

// BindFlags registers the agent's flags on fs, bound to c, whose current values are their defaults
// (pass a Default() config): the agent's own (the Flag* names) and kubelet/config's KubeletConfiguration
// flags with --config. After fs is parsed, Config returns the effective configuration.
func BindFlags(fs *pflag.FlagSet, c *Config) *Flags {
	fs.StringVar(&c.DataDir, FlagDataDir, c.DataDir, "directory for the agent's persistent state (containerd, kubelet, images, CNI IPAM)")
	fs.StringVar(&c.Server, FlagServer, c.Server, "API server URL (overrides the kubeconfig's)")
	fs.StringVar(&c.Kubeconfig, FlagKubeconfig, c.Kubeconfig, "kubeconfig with the node's credentials (system:node:<name>)")
	fs.StringVar(&c.NodeName, FlagNodeName, c.NodeName, "Node name (default: the hostname, lowercased)")
	fs.StringVar(&c.NodeIP, FlagNodeIP, c.NodeIP, "InternalIP of the node (default: the address of the default-route interface)")
	fs.Var(labelsValue{&c.NodeLabels}, FlagNodeLabels, "labels added at registration: key=value,...")
	fs.StringVar(&c.RootDir, FlagRootDir, c.RootDir, "kubelet state directory (default <data-dir>/kubelet)")
	fs.StringVar(&c.CNIBinDir, FlagCNIBinDir, c.CNIBinDir, "where the managed containerd's nodekit-cni plugin is installed (default <data-dir>/cni/bin; /usr/lib/cni and /opt/cni/bin are searched too); with --container-runtime-endpoint, that runtime's CNI plugin dir, which the agent then checks for the node's Ready condition")
	fs.StringVar(&c.ContainerdConfig, FlagContainerdConfig, c.ContainerdConfig, "an external containerd 1.x's config file, read for its cgroup driver (SystemdCgroup) (default /etc/containerd/config.toml)")
	fs.StringVar(&c.CNIConfDir, FlagCNIConfDir, c.CNIConfDir, "CNI config directory; the agent writes its conflist here once the node has a podCIDR")
	fs.StringVar(&c.ClusterCIDR, FlagClusterCIDR, c.ClusterCIDR, "the cluster's pod network, containing every node's podCIDR")
	fs.StringVar(&c.ImagesDir, FlagImagesDir, c.ImagesDir, "OCI image archives imported into the managed containerd at start (default <data-dir>/images)")
	fs.StringVar(&c.Token, FlagToken, c.Token, "bootstrap token <id>.<secret> ('nodekit token create' on the server; default $NODEKIT_TOKEN): with no valid "+
		"--kubeconfig yet, the agent joins with it (requests its client certificate) and writes --kubeconfig")
	fs.StringVar(&c.CAHash, FlagCAHash, c.CAHash, "sha256:<hex> of the cluster CA's public key (printed by 'nodekit token create'; default $NODEKIT_CA_HASH); required with --token")
	fs.StringVar(&c.NetworkBackend, FlagNetworkBackend, c.NetworkBackend, "how pods reach pods on other nodes (flannel's --flannel-backend): host-gw, a route per other node "+
		"'<its podCIDR> via <its InternalIP>' kept by the agent (the nodes share one L2 segment); vxlan, tunnels over UDP through the device nodekit.<VNI> "+
		"(the nodes reach each other's InternalIP over any routed network); none, no route controller: you route the podCIDRs")
	fs.IntVar(&c.VXLANVNI, FlagVXLANVNI, c.VXLANVNI, "the vxlan backend's VXLAN network identifier, the same on every node")
	fs.IntVar(&c.VXLANPort, FlagVXLANPort, c.VXLANPort, "the vxlan backend's UDP port, the same on every node (flannel's and the kernel's 8472)")
	fs.BoolVar(&c.DisableProxy, FlagDisableProxy, c.DisableProxy, "do not run the service proxy (when another kube-proxy serves this node)")
	fs.StringVar((*string)(&c.ProxyMode), FlagProxyMode, string(c.ProxyMode), "service proxy backend: iptables, ipvs or nftables")
	fs.StringVar(&c.ProxyMetricsAddr, FlagProxyMetricsAddr, c.ProxyMetricsAddr, "host:port of the proxy's /metrics and /debug/services; empty disables")
	fs.StringVar(&c.ProxyHealthzAddr, FlagProxyHealthzAddr, c.ProxyHealthzAddr, "host:port of the proxy's /healthz and /livez (kube-proxy's --healthz-bind-address); empty disables")
	fs.StringVar(&c.GoMemoryLimit, FlagGoMemoryLimit, c.GoMemoryLimit, "the Go runtime's soft memory limit (runtime/debug.SetMemoryLimit; a quantity such as 64Mi): "+
		"the garbage collector runs harder near it instead of letting the heap double; empty or 0: none; $GOMEMLIMIT, when set, wins")
	fs.BoolVar(&c.ComponentPods, FlagComponentPods, c.ComponentPods, "publish the component processes recorded in <data-dir>/components (etcd, kube-apiserver, ... by a server on this data dir; kube-proxy by this agent) as mirror pods in kube-system, with their logs")
	return &Flags{cfg: c, kubelet: kubeletconfig.BindFlags(fs, &c.Kubelet, c.KubeletConfigFile)}
}

// Config returns the bound configuration once the flags are parsed, with Kubelet resolved
// (kubelet/config's Resolve: --config's file overlaid with the kubelet flags set explicitly). Errors name
// the file or the flag.
func (f *Flags) Config() (Config, error) {
	kc, err := f.kubelet.Resolve()
	if err != nil {
		return Config{}, err
	}
	c := *f.cfg
	c.KubeletConfigFile, c.Kubelet = f.kubelet.ConfigFile, *kc
	return c, nil
}

// Args returns the command line after `nodekit` that runs this agent: Command, --data-dir (always, so
// that the process names its data dir, which `nodekit down` checks), then FlagArgs. The hooks are not
// part of it. The token, when set, appears in the argv: pass it as $NODEKIT_TOKEN where command lines
// are visible.
func (c Config) Args() []string {
	return append([]string{Command, "--" + FlagDataDir, c.DataDir}, c.FlagArgs()...)
}

// FlagArgs returns the flags, other than --data-dir, whose values differ from Default()'s, in flag-name
// order: --name value, or --name=value for a bool or an empty value. With KubeletConfigFile set, every kubelet flag is
// given, so that the file supplies only the fields without a flag; without it, Kubelet fields that have
// no flag are not carried.
func (c Config) FlagArgs() []string {
	got, def := c.deepCopy(), Default()
	gotFS, defFS := pflag.NewFlagSet(Command, pflag.ContinueOnError), pflag.NewFlagSet(Command, pflag.ContinueOnError)
	kf := BindFlags(gotFS, &got).kubelet
	BindFlags(defFS, &def)
	kubeletFlag := map[string]bool{}
	for _, n := range kf.Names() {
		kubeletFlag[n] = true
	}
	var args []string
	gotFS.VisitAll(func(fl *pflag.Flag) {
		v := flagValue(fl)
		switch {
		case fl.Name == FlagDataDir:
			return
		case v == flagValue(defFS.Lookup(fl.Name)) && !(c.KubeletConfigFile != "" && kubeletFlag[fl.Name]):
			return
		}
		// A bool, or an empty value, is one word "--name=value": an empty word would not survive the
		// word splitting of an environment file (install.sh's NODEKIT_AGENT_ARGS).
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool || v == "" {
			args = append(args, "--"+fl.Name+"="+v)
			return
		}
		args = append(args, "--"+fl.Name, v)
	})
	return args
}

// flagValue is fl's value as its command line spells it (lists comma-separated).
func flagValue(fl *pflag.Flag) string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		return strings.Join(sv.GetSlice(), ",")
	}
	return fl.Value.String()
}

// deepCopy copies c with its own label map and KubeletConfiguration.
func (c Config) deepCopy() Config {
	c.NodeLabels = maps.Clone(c.NodeLabels)
	c.Kubelet = *c.Kubelet.DeepCopy()
	return c
}

// labelsValue is the pflag.Value of --node-labels (kubelet/config's ParseLabels syntax).
type labelsValue struct{ labels *map[string]string }

func (v labelsValue) Set(s string) error {
	l, err := kubeletconfig.ParseLabels(s)
	if err != nil {
		return fmt.Errorf("--%s: %w", FlagNodeLabels, err)
	}
	if len(l) == 0 {
		l = nil
	}
	*v.labels = l
	return nil
}

func (v labelsValue) String() string {
	if v.labels == nil {
		return ""
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(*v.labels)) {
		out = append(out, k+"="+(*v.labels)[k])
	}
	return strings.Join(out, ",")
}

func (v labelsValue) Type() string { return "labels" }
