// Package cluster brings up a single-node nodekit cluster as a supervised process tree: `nodekit server`
// (embedded etcd, API server, scheduler, controller manager), then `nodekit agent` (kubelet, service
// proxy, managed containerd, bundled images, nodekit-cni), both children of the same binary. It waits for
// the API, then for the Node to be Ready, applies the demo workload and reports the state; stopping it
// stops the children in reverse order. Down undoes everything it made on the host.
//
// This is the k3s shape (one binary, components as parts of one tree) with each component kept a separate
// process, so each can be run, restarted and read on its own, as on a real node.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/examples"
	"github.com/nodekit/nodekit/internal/cli"
	"github.com/nodekit/nodekit/server"
)

// Config describes the single-node cluster. Zero values take the documented defaults (those of the
// components' own flags), so `nodekit up` with no flags gives the standard ports and ranges.
type Config struct {
	// Executable is the nodekit binary the children run; default os.Executable().
	Executable string
	// DataDir holds everything: etcd, PKI, kubeconfigs, containerd, kubelet state, logs. Required.
	DataDir string
	// NodeName is the Node's name; default the hostname, lowercased.
	NodeName string
	// NodeIP is the node's InternalIP; default the agent's (the default-route interface address).
	NodeIP string
	// APIBindAddress and APIPort: where the API server serves HTTPS (default 0.0.0.0:6443).
	APIBindAddress string
	APIPort        int
	// EtcdClientAddr is the embedded etcd's client address (default 127.0.0.1:2379).
	EtcdClientAddr string
	// ServiceCIDR is the ClusterIP range (default 10.96.0.0/12); ClusterCIDR the pod network the node's
	// podCIDR is cut from (default agent.DefaultClusterCIDR).
	ServiceCIDR, ClusterCIDR string
	// KubeletAddress and KubeletPort: the kubelet server (default 0.0.0.0:10250).
	KubeletAddress string
	KubeletPort    int
	// ProxyMetricsAddr is the agent's service proxy's /metrics address (default 127.0.0.1:10249);
	// ProxyHealthzAddr its /healthz and /livez address (default 0.0.0.0:10256).
	ProxyMetricsAddr, ProxyHealthzAddr string
	// ImagesDir holds the bundled image archives the agent imports (default <DataDir>/images).
	ImagesDir string
	// CNIConfDir is where the agent writes its conflist (default /etc/cni/net.d).
	CNIConfDir string
	// PodLogsDir is the kubelet's pod log directory (default /var/log/pods).
	PodLogsDir string
	// Containerd is the containerd binary the agent manages; default "containerd" from PATH. Its
	// directory is put first in the agent's PATH (containerd finds its shim there).
	Containerd string
	// Disable names the add-ons (controlplane/addons.Names) the server does not install (--disable).
	Disable []string
	// ResolvConf is the kubelet's resolver file for dnsPolicy Default pods, CoreDNS's included (its
	// upstream servers); default /etc/resolv.conf.
	ResolvConf string
	// KubeletConfig is a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) the agent reads with
	// --config, for the kubelet fields no flag of up sets (evictionHard, imageGCHighThresholdPercent, ...);
	// empty: none.
	KubeletConfig string
	// Demo applies examples.Demo once the node is Ready (nodekit up's default).
	Demo bool
	// Timeouts: for the API server to answer, the Node to turn Ready, and the demo to be available.
	APITimeout, NodeTimeout, DemoTimeout time.Duration
	// StopTimeout is each component's grace between SIGTERM and SIGKILL (default 45 s: the agent stops
	// its containerd within it).
	StopTimeout time.Duration
	// ComponentLogs receives the components' log records (tagged proc=<name>) at the level it enables;
	// nil: only the log files under <DataDir>/logs get them.
	ComponentLogs slog.Handler
	// Logger receives up's own events; default slog.Default().
	Logger *slog.Logger
	// Out receives the summary (kubeconfig, usage, status table); default os.Stdout.
	Out io.Writer
	// CLI is how the user runs nodekit, as the summary's hints spell it (e.g. "bin/nodekit" under
	// `make up`, whose bin/ is not on PATH); default "nodekit".
	CLI string
}

// DefaultDataDir and DefaultLabDataDir are the --data-dir of `nodekit up` and of `nodekit lab` when
// the flag is not given; the printed hints leave --data-dir out for them.
const (
	DefaultDataDir    = "/var/lib/nodekit"
	DefaultLabDataDir = "/var/lib/nodekit-lab"
)

// cliWithDataDir is the command line prefix that reaches the same data dir again: cli, plus
// --data-dir dataDir unless it is def.
func cliWithDataDir(cli, dataDir, def string) string {
	if dataDir == def {
		return cli
	}
	return cli + " --data-dir " + dataDir
}

func (c *Config) complete() error {
	if c.DataDir == "" {
		return errors.New("cluster: DataDir is required")
	}
	dd, err := filepath.Abs(c.DataDir)
	if err != nil {
		return err
	}
	c.DataDir = dd
	if c.KubeletConfig != "" {
		if c.KubeletConfig, err = filepath.Abs(c.KubeletConfig); err != nil {
			return err
		}
		if _, err := os.Stat(c.KubeletConfig); err != nil {
			return fmt.Errorf("cluster: KubeletConfig: %w", err)
		}
	}
	if c.Executable == "" {
		if c.Executable, err = os.Executable(); err != nil {
			return err
		}
	}
	if c.NodeName, err = nodeutil.GetHostname(c.NodeName); err != nil {
		return fmt.Errorf("cluster: node name: %w", err)
	}
	if c.NodeIP != "" && net.ParseIP(c.NodeIP) == nil {
		return fmt.Errorf("cluster: NodeIP %q is not an IP address", c.NodeIP)
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.APIBindAddress, server.DefaultBindAddress)
	def(&c.EtcdClientAddr, server.DefaultEtcdClientAddr)
	def(&c.ServiceCIDR, server.DefaultServiceCIDR)
	def(&c.ClusterCIDR, server.DefaultClusterCIDR)
	ad := agent.Default()
	def(&c.KubeletAddress, ad.Kubelet.Address)
	def(&c.ProxyMetricsAddr, ad.ProxyMetricsAddr)
	def(&c.ProxyHealthzAddr, ad.ProxyHealthzAddr)
	def(&c.ImagesDir, agent.Config{DataDir: c.DataDir}.Paths().Images)
	def(&c.CNIConfDir, ad.CNIConfDir)
	def(&c.PodLogsDir, ad.Kubelet.PodLogsDir)
	for _, cidr := range []struct{ field, v string }{{"ServiceCIDR", c.ServiceCIDR}, {"ClusterCIDR", c.ClusterCIDR}} {
		if _, _, err := net.ParseCIDR(cidr.v); err != nil {
			return fmt.Errorf("cluster: %s %q: %w", cidr.field, cidr.v, err)
		}
	}
	if err := c.server().Validate(); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if c.APIPort == 0 {
		c.APIPort = server.DefaultSecurePort
	}
	if c.KubeletPort == 0 {
		c.KubeletPort = int(ad.Kubelet.Port)
	}
	if c.APITimeout == 0 {
		c.APITimeout = 2 * time.Minute
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 3 * time.Minute
	}
	if c.DemoTimeout == 0 {
		c.DemoTimeout = 3 * time.Minute
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 45 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.CLI == "" {
		c.CLI = "nodekit"
	}
	if c.Containerd != "" {
		if c.Containerd, err = filepath.Abs(c.Containerd); err != nil {
			return err
		}
		if fi, err := os.Stat(c.Containerd); err != nil || fi.IsDir() {
			return fmt.Errorf("cluster: Containerd %q is not an executable file", c.Containerd)
		}
	}
	return nil
}

// State is what Up records in <DataDir>/cluster.json for Down: where the things it made live.
type State struct {
	UpPID      int    `json:"upPID"`
	NodeName   string `json:"nodeName"`
	CNIConfDir string `json:"cniConfDir"`
	PodLogsDir string `json:"podLogsDir"`
	Containerd string `json:"containerd,omitempty"`
	Executable string `json:"executable"`
}

func statePath(dataDir string) string { return filepath.Join(dataDir, "cluster.json") }

// ReadState loads <dataDir>/cluster.json; a missing file gives the defaults Up would have used.
func ReadState(dataDir string) (State, error) {
	ad := agent.Default()
	st := State{CNIConfDir: ad.CNIConfDir, PodLogsDir: ad.Kubelet.PodLogsDir}
	b, err := os.ReadFile(statePath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", statePath(dataDir), err)
	}
	return st, nil
}

// Cluster is a running single-node cluster (see Up).
type Cluster struct {
	cfg        Config
	components []*component
	relays     []*relay
	// AdminKubeconfig is <DataDir>/admin.kubeconfig (cluster-admin).
	AdminKubeconfig string
	// Client is an admin client of the API server.
	Client kubernetes.Interface
	rest   *rest.Config
}

// Up starts the cluster and returns once the node is Ready, the demo (if asked) is applied and the
// summary printed. Run then supervises until ctx ends. On error every started child is stopped.
// A second Up on the same DataDir while one runs fails (the PID in cluster.json is alive).
func Up(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	lay := LayoutOf(cfg.DataDir)
	for _, d := range []string{cfg.DataDir, lay.Logs, lay.Run, lay.NodeCredentials} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	if prev, err := ReadState(cfg.DataDir); err == nil && prev.UpPID != 0 && prev.UpPID != os.Getpid() && processAlive(prev.UpPID, "up") {
		return nil, fmt.Errorf("nodekit up (pid %d) already runs on %s: stop it or run 'nodekit down'", prev.UpPID, cfg.DataDir)
	}
	st := State{UpPID: os.Getpid(), NodeName: cfg.NodeName, CNIConfDir: cfg.CNIConfDir, PodLogsDir: cfg.PodLogsDir,
		Containerd: cfg.Containerd, Executable: cfg.Executable}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(statePath(cfg.DataDir), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, AdminKubeconfig: cfg.server().Paths().AdminKubeconfig}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	log := cfg.Logger

	// 1. The control plane.
	if err := c.startServer(cfg.server()); err != nil {
		return nil, err
	}
	log.Info("waiting for the API server", "timeout", cfg.APITimeout)
	if err := c.waitAPI(ctx); err != nil {
		return nil, err
	}
	// 2. The node: the agent (kubelet and service proxy) with its own node identity.
	nodeKubeconfig, err := c.writeNodeKubeconfig()
	if err != nil {
		return nil, err
	}
	var agentEnv []string
	if cfg.Containerd != "" {
		agentEnv = append(agentEnv, "PATH="+filepath.Dir(cfg.Containerd)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	// The Node may still say Ready from an earlier run: only a heartbeat of this agent counts (metav1.Time
	// has whole seconds).
	agentStart := time.Now().Truncate(time.Second)
	if err := c.start(spec{name: "agent", argv: c.agentConfig(nodeKubeconfig).Args(), env: agentEnv}); err != nil {
		return nil, err
	}
	log.Info("waiting for the node to be Ready", "node", cfg.NodeName, "timeout", cfg.NodeTimeout)
	if err := c.waitNodeReady(ctx, agentStart); err != nil {
		return nil, err
	}
	log.Info("node Ready", "node", cfg.NodeName)
	// 3. The demo workload.
	var demoErr error
	if cfg.Demo {
		applied, err := Apply(ctx, c.rest, examples.Demo)
		if err != nil {
			return nil, err
		}
		for _, a := range applied {
			log.Info("demo object", "kind", a.Kind, "object", a.Namespace+"/"+a.Name, "created", a.Created)
		}
		log.Info("waiting for the demo Deployment to be available", "timeout", cfg.DemoTimeout)
		demoErr = c.waitDemo(ctx)
		if demoErr == nil {
			demoErr = c.waitService(ctx)
		}
		if demoErr != nil && ctx.Err() == nil {
			// The cluster is up; a demo that does not come up is reported, not fatal.
			log.Warn("demo not available", "err", demoErr)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.PrintSummary(ctx, cfg.Out)
	return c, nil
}

// spec is one child to start: `nodekit <argv> --log-json` (argv a component Config's Args()), in network
// namespace netns (a name under /run/netns, entered with nsenter) when set. name tags its logs and names
// its log and PID files.
type spec struct {
	name, netns string
	argv, env   []string
}

func (c *Cluster) start(s spec) error {
	cfg := c.cfg
	r, err := newRelay(LayoutOf(cfg.DataDir).LogFile(s.name), s.name, cfg.ComponentLogs)
	if err != nil {
		return err
	}
	c.relays = append(c.relays, r)
	// Every child logs JSON for the relay.
	exe, full := cfg.Executable, append(slices.Clone(s.argv), cli.Flag(cli.FlagLogJSON))
	if s.netns != "" {
		// nsenter execs nodekit in place (the PID started is nodekit's) and, unlike `ip netns exec`,
		// keeps the mount namespace: runc needs the host's /sys/fs/cgroup.
		exe, full = "nsenter", append([]string{"--net=" + netnsPath(s.netns), "--", cfg.Executable}, full...)
	}
	comp := &component{name: s.name, exe: exe, args: full, env: s.env, out: r,
		log: cfg.Logger.With("proc", s.name), pidFile: pidFilePath(cfg.DataDir, s.name)}
	if err := comp.start(); err != nil {
		return err
	}
	c.components = append(c.components, comp)
	return nil
}

// server is the server of c's cluster, in DataDir.
func (c *Config) server() server.Config {
	return server.Config{DataDir: c.DataDir,
		APIServer:   apiserver.Options{BindAddress: c.APIBindAddress, Port: c.APIPort, ServiceCIDR: c.ServiceCIDR},
		Etcd:        etcd.Config{ClientAddr: c.EtcdClientAddr},
		Controllers: controllers.Options{ClusterCIDR: c.ClusterCIDR},
		Addons:      addons.Options{Disabled: c.Disable}}
}

// kubeletDNS gives a's kubelet the cluster DNS: clusterDNS the kube-dns address of the service range
// (addons.DNSServiceIP, also when the coredns add-on is disabled, as k3s does, so that a DNS server
// installed by hand at that address serves the pods), clusterDomain cluster.local, and ResolvConf.
func (c *Config) kubeletDNS(a *agent.Config) {
	if ip, err := addons.DNSServiceIP(c.ServiceCIDR); err == nil { // complete validated it
		a.Kubelet.ClusterDNS = []string{ip.String()}
	}
	a.Kubelet.ClusterDomain = addons.DefaultClusterDomain
	if c.ResolvConf != "" {
		rc := c.ResolvConf
		a.Kubelet.ResolverConfig = &rc
	}
}

// startServer starts `nodekit server` for sc, tagged "server", with the default audit log
// (server.Config.WithDefaultAudit) unless sc has a policy of its own.
func (c *Cluster) startServer(sc server.Config) error {
	return c.start(spec{name: server.CommandName, argv: sc.WithDefaultAudit().Args()})
}

// agentConfig is the agent of the cluster's node, with the node credentials in kubeconfig.
func (c *Cluster) agentConfig(kubeconfig string) agent.Config {
	cfg := c.cfg
	a := agent.Default()
	a.DataDir, a.Kubeconfig, a.NodeName, a.NodeIP = cfg.DataDir, kubeconfig, cfg.NodeName, cfg.NodeIP
	a.ImagesDir, a.CNIConfDir, a.ClusterCIDR, a.ProxyMetricsAddr = cfg.ImagesDir, cfg.CNIConfDir, cfg.ClusterCIDR, cfg.ProxyMetricsAddr
	a.ProxyHealthzAddr, a.KubeletConfigFile = cfg.ProxyHealthzAddr, cfg.KubeletConfig
	a.Kubelet.Address, a.Kubelet.Port, a.Kubelet.PodLogsDir = cfg.KubeletAddress, int32(cfg.KubeletPort), cfg.PodLogsDir
	cfg.kubeletDNS(&a)
	return a
}

// waitAPI waits for the admin kubeconfig and the API server's /readyz.
func (c *Cluster) waitAPI(ctx context.Context) error {
	server := c.components[0]
	return poll(ctx, c.cfg.APITimeout, "the API server to answer /readyz", func() (bool, string, error) {
		if err := server.alive(ctx); err != nil {
			return false, "", err
		}
		if c.Client == nil {
			if _, err := os.Stat(c.AdminKubeconfig); err != nil {
				return false, "no admin kubeconfig yet", nil
			}
			rc, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
			if err != nil {
				return false, err.Error(), nil
			}
			rc.Timeout = 10 * time.Second
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return false, "", err
			}
			c.rest, c.Client = rc, cs
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(string(body)) == "ok", string(body), nil
	})
}

// writeNodeKubeconfig issues the node's client certificate (CN=system:node:<name>, O=system:nodes) from
// the cluster CA and writes <DataDir>/agent/kubelet.kubeconfig for the agent; reused while valid.
func (c *Cluster) writeNodeKubeconfig() (string, error) {
	ca, err := pki.LoadOrCreateCA(c.cfg.server().Paths().PKIDir)
	if err != nil {
		return "", err
	}
	dir := LayoutOf(c.cfg.DataDir).NodeCredentials
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	kp, err := ca.LoadOrIssue(dir, "kubelet-client", pki.NodeClientSpec(c.cfg.NodeName))
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubelet.kubeconfig")
	if err := pki.WriteKubeconfig(path, c.rest.Host, ca.CertPEM, pki.NodeUserPrefix+c.cfg.NodeName, kp); err != nil {
		return "", err
	}
	return path, nil
}

// waitNodeReady waits until the Node's Ready condition is True with a heartbeat at or after since.
func (c *Cluster) waitNodeReady(ctx context.Context, since time.Time) error {
	return poll(ctx, c.cfg.NodeTimeout, "node "+c.cfg.NodeName+" to be Ready", func() (bool, string, error) {
		for _, comp := range c.components {
			if err := comp.alive(ctx); err != nil && ctx.Err() == nil {
				// A restart may bring it back; keep waiting, but say why.
				return false, err.Error(), nil
			}
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady {
				if cond.LastHeartbeatTime.Time.Before(since) {
					return false, "Ready condition not yet posted by this agent (last heartbeat " + cond.LastHeartbeatTime.Format(time.RFC3339) + ")", nil
				}
				return cond.Status == v1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message), nil
			}
		}
		return false, "no Ready condition yet", nil
	})
}

func (c *Cluster) waitDemo(ctx context.Context) error {
	return poll(ctx, c.cfg.DemoTimeout, "deployment "+examples.DemoName+" to be available", func() (bool, string, error) {
		d, err := c.Client.AppsV1().Deployments(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.ReadyReplicas >= want, fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, want), nil
	})
}

// waitService waits for the demo Service to answer through its ClusterIP from this host (the proxy
// programs it within its sync period once the endpoints are ready).
func (c *Cluster) waitService(ctx context.Context) error {
	return poll(ctx, time.Minute, "service "+examples.DemoName+" to answer through its ClusterIP", func() (bool, string, error) {
		svc, err := c.Client.CoreV1().Services(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
		if err != nil || len(svc.Spec.Ports) == 0 {
			return false, fmt.Sprint(err), nil
		}
		if _, err := Get(ctx, ServiceURL(svc), 3*time.Second); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// Run supervises the components until ctx ends, then stops them (Stop).
func (c *Cluster) Run(ctx context.Context) {
	<-ctx.Done()
	c.Stop()
}

// Stop stops the components in reverse start order (agent, server): SIGTERM, StopTimeout, SIGKILL,
// each on the PID it started. Pods keep running under their shims, as when a kubelet restarts; the
// next Up adopts them, Down removes them. Idempotent.
func (c *Cluster) Stop() {
	for i := len(c.components) - 1; i >= 0; i-- {
		c.components[i].stop(c.cfg.StopTimeout)
	}
	c.components = nil
	for _, r := range c.relays {
		_ = r.Close()
	}
	c.relays = nil
	if st, err := ReadState(c.cfg.DataDir); err == nil && st.UpPID == os.Getpid() {
		st.UpPID = 0
		b, _ := json.MarshalIndent(st, "", "  ")
		_ = os.WriteFile(statePath(c.cfg.DataDir), append(b, '\n'), 0o644)
	}
	c.cfg.Logger.Info("cluster stopped", "dataDir", c.cfg.DataDir)
}

// poll calls check every second until it reports done, returns an error, or timeout/ctx ends; the
// timeout error carries check's last detail.
func poll(ctx context.Context, timeout time.Duration, what string, check func() (done bool, detail string, err error)) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		done, detail, err := check()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		last = detail
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// processAlive reports whether pid runs a nodekit command line containing word (so a reused PID of
// another program is never taken for ours).
func processAlive(pid int, word string) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	for _, a := range nodekitArgs(pid) {
		if a == word {
			return true
		}
	}
	return false
}

// nodekitArgs returns the arguments of pid's command line when pid runs nodekit (its executable's name
// contains "nodekit"), else nil.
func nodekitArgs(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "nodekit") {
		return nil
	}
	return args[1:]
}
