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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/internal/cli"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/server"
)

// LabConfig describes a multi-node lab on one host: a server in the host's network namespace and N
// agent "nodes", each a network namespace wired to a lab bridge, with its own agent (kubelet, service
// proxy, and managed containerd with its own root, state and socket), data and CNI config directories.
type LabConfig struct {
	// DataDir holds the server's data (DataDir/server), each node's (DataDir/nodes/<name>) and the
	// logs. Required.
	DataDir string
	// Nodes is the number of agent nodes; JoinNodes the number of nodes made without an agent, to be
	// joined by hand like a real machine (hack/install.sh agent --token inside `nodekit lab exec`).
	// Together 1..20; join nodes come after the agent nodes.
	Nodes, JoinNodes int
	// Prefix names the lab's host objects: the bridge <Prefix>0, the namespaces <Prefix>-<node>, the
	// host veths <Prefix>-<node>; node names are <Prefix>-n<i>. Default "nklab"; at most 8 bytes.
	Prefix string
	// Subnet is the lab bridge's IPv4 /24: the bridge (and the API server) is .1, node i is .(10+i).
	// Default 172.30.0.0/24.
	Subnet string
	// APIPort, EtcdClientAddr, ServiceCIDR, ClusterCIDR as in Config (defaults 6443, 127.0.0.1:2379,
	// 10.96.0.0/12, 10.244.0.0/16).
	APIPort                  int
	EtcdClientAddr           string
	ServiceCIDR, ClusterCIDR string
	// NodeMonitorGracePeriod and NotReadyTolerationSeconds make node loss visible quickly (default 20 s
	// and 15 s, against 40 s and 300 s in production).
	NodeMonitorGracePeriod    time.Duration
	NotReadyTolerationSeconds int
	// Disable names the add-ons the server does not install, as Config.Disable.
	Disable []string
	// NetworkBackend is every node's agent --network-backend (podroutes.Backends; default host-gw): with
	// vxlan the nodes tunnel to each other over the lab bridge. The host, which has no Node, routes the
	// podCIDRs via the nodes' lab addresses (host-gw) with either.
	NetworkBackend string
	// KubeletConfig is every agent node's KubeletConfiguration file, as Config.KubeletConfig (joined
	// nodes get it in their JoinArgs); empty: none.
	KubeletConfig         string
	ImagesDir, Containerd string
	Executable            string
	NodeTimeout           time.Duration
	StopTimeout           time.Duration
	ComponentLogs         slog.Handler
	Logger                *slog.Logger
	Out                   io.Writer
	// CLI is how the user runs nodekit, as the summary's hints spell it; default "nodekit".
	CLI string
}

// LabNode is one node of a lab.
type LabNode struct {
	Name    string `json:"name"`
	Netns   string `json:"netns"`
	IP      string `json:"ip"`
	HostIf  string `json:"hostIf"`
	DataDir string `json:"dataDir"`
	// Join marks a node made without an agent (LabConfig.JoinNodes); JoinArgs are the agent flags it
	// needs in the lab beyond what hack/install.sh writes: its own CNI config and pod log dirs (which
	// `lab down` cleans), the lab's images and pod network, the kubelet server on its lab address.
	Join     bool     `json:"join,omitempty"`
	JoinArgs []string `json:"joinArgs,omitempty"`
}

// LabState is recorded in <DataDir>/lab.json for `lab exec` and `lab down`.
type LabState struct {
	UpPID  int       `json:"upPID"`
	Bridge string    `json:"bridge"`
	Nodes  []LabNode `json:"nodes"`
}

func labStatePath(dataDir string) string { return filepath.Join(dataDir, "lab.json") }

// ReadLabState loads <dataDir>/lab.json.
func ReadLabState(dataDir string) (LabState, error) {
	var st LabState
	b, err := os.ReadFile(labStatePath(dataDir))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func (c *LabConfig) complete() error {
	if c.DataDir == "" {
		return errors.New("lab: DataDir is required")
	}
	var err error
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return err
	}
	if c.Nodes < 0 || c.JoinNodes < 0 || c.Nodes+c.JoinNodes < 1 || c.Nodes+c.JoinNodes > 20 {
		return fmt.Errorf("lab: Nodes %d + JoinNodes %d: want 1..20 nodes", c.Nodes, c.JoinNodes)
	}
	if c.Prefix == "" {
		c.Prefix = "nklab"
	}
	if len(c.Prefix) > 8 {
		return fmt.Errorf("lab: Prefix %q: at most 8 bytes (interface names)", c.Prefix)
	}
	if c.Subnet == "" {
		c.Subnet = "172.30.0.0/24"
	}
	if _, n, err := net.ParseCIDR(c.Subnet); err != nil || n.IP.To4() == nil {
		return fmt.Errorf("lab: Subnet %q is not an IPv4 CIDR", c.Subnet)
	}
	if c.NetworkBackend == "" {
		c.NetworkBackend = podroutes.BackendHostGW
	}
	if !slices.Contains(podroutes.Backends, c.NetworkBackend) {
		return fmt.Errorf("lab: NetworkBackend %q is not one of %v", c.NetworkBackend, podroutes.Backends)
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = 20 * time.Second
	}
	if c.NotReadyTolerationSeconds == 0 {
		c.NotReadyTolerationSeconds = 15
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 4 * time.Minute
	}
	return nil
}

// server is the lab's server (in <DataDir>/server, on the lab bridge address), for cfg, the lab's
// completed cluster Config: node loss shows within NodeMonitorGracePeriod, and pods leave a lost node
// after NotReadyTolerationSeconds.
func (c *LabConfig) server(cfg Config) server.Config {
	sc := cfg.server()
	sc.DataDir = LayoutOf(cfg.DataDir).LabServer
	sc.APIServer.AdvertiseAddress = cfg.APIBindAddress
	sc.APIServer.DefaultTolerationSeconds = int64(c.NotReadyTolerationSeconds)
	sc.Controllers.NodeMonitorGracePeriod = c.NodeMonitorGracePeriod
	return sc
}

// labIP returns host number h of the lab /24.
func (c *LabConfig) labIP(h int) string {
	_, n, _ := net.ParseCIDR(c.Subnet)
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], byte(h)).String()
}

// Lab is a running lab (LabUp).
type Lab struct {
	*Cluster
	lcfg  LabConfig
	state LabState
}

// LabUp builds the lab network (bridge, one namespace and veth per node), starts the server, then each
// node's agent (kubelet and service proxy) inside its namespace, waits for every node to be Ready and
// keeps the pod routes (each node's podCIDR via its lab address) in every namespace and on the host.
// Join nodes get their namespace and data dir only. Stop (or ctx) stops the processes; LabDown removes
// everything.
func LabUp(ctx context.Context, lc LabConfig) (_ *Lab, err error) {
	if err := lc.complete(); err != nil {
		return nil, err
	}
	if prev, err := ReadLabState(lc.DataDir); err == nil && prev.UpPID != 0 && processAlive(prev.UpPID, "up") {
		return nil, fmt.Errorf("lab: 'nodekit lab up' (pid %d) already runs on %s", prev.UpPID, lc.DataDir)
	}
	cfg := Config{DataDir: lc.DataDir, NodeName: lc.Prefix + "-server", APIBindAddress: lc.labIP(1), APIPort: lc.APIPort,
		EtcdClientAddr: lc.EtcdClientAddr, ServiceCIDR: lc.ServiceCIDR, ClusterCIDR: lc.ClusterCIDR, ImagesDir: lc.ImagesDir, Disable: lc.Disable, KubeletConfig: lc.KubeletConfig,
		Containerd: lc.Containerd, Executable: lc.Executable, NodeTimeout: lc.NodeTimeout, StopTimeout: lc.StopTimeout,
		ComponentLogs: lc.ComponentLogs, Logger: lc.Logger, Out: lc.Out, CLI: lc.CLI}
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	lay := LayoutOf(cfg.DataDir)
	for _, d := range []string{lay.Logs, lay.Run, lay.LabServer} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	sc := lc.server(cfg)
	l := &Lab{Cluster: &Cluster{cfg: cfg, AdminKubeconfig: sc.Paths().AdminKubeconfig}, lcfg: lc}
	l.state = LabState{UpPID: os.Getpid(), Bridge: lc.Prefix + "0"}
	for i := 1; i <= lc.Nodes+lc.JoinNodes; i++ {
		name := fmt.Sprintf("%s-n%d", lc.Prefix, i)
		n := LabNode{Name: name, Netns: name, IP: lc.labIP(10 + i), HostIf: name, DataDir: filepath.Join(lay.LabNodes, name)}
		if i > lc.Nodes {
			n.Join = true
			n.JoinArgs = labAgent(cfg, lc.NetworkBackend, n).FlagArgs()
		}
		l.state.Nodes = append(l.state.Nodes, n)
	}
	if err := l.saveState(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	log := cfg.Logger
	if err := l.buildNetwork(); err != nil {
		return nil, err
	}
	serverDir := sc.DataDir
	if err := l.startServer(sc); err != nil {
		return nil, err
	}
	log.Info("waiting for the API server", "timeout", cfg.APITimeout)
	if err := l.waitAPI(ctx); err != nil {
		return nil, err
	}
	var env []string
	if cfg.Containerd != "" {
		env = append(env, "PATH="+filepath.Dir(cfg.Containerd)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	for _, n := range l.state.Nodes {
		ac := labAgent(cfg, lc.NetworkBackend, n)
		// down, run inside the node's namespace, finds the node's runtime and CNI config from this; an
		// agent joined by hand uses the same dirs (JoinArgs).
		st := State{NodeName: n.Name, CNIConfDir: ac.CNIConfDir, PodLogsDir: ac.Kubelet.PodLogsDir, Containerd: cfg.Containerd, Executable: cfg.Executable}
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.MkdirAll(n.DataDir, 0o750); err != nil {
			return nil, err
		}
		if err := os.WriteFile(statePath(n.DataDir), b, 0o644); err != nil {
			return nil, err
		}
		if n.Join {
			continue
		}
		kubeconfig, err := l.nodeKubeconfig(serverDir, n.Name, n.DataDir)
		if err != nil {
			return nil, err
		}
		ac.DataDir, ac.Kubeconfig, ac.NodeName, ac.NodeIP = n.DataDir, kubeconfig, n.Name, n.IP
		if err := l.start(spec{name: n.Name + "-agent", argv: ac.Args(), netns: n.Netns, env: env}); err != nil {
			return nil, err
		}
	}
	for _, n := range l.state.Nodes {
		if n.Join {
			continue
		}
		log.Info("waiting for the node to be Ready", "node", n.Name)
		if err := l.waitReady(ctx, n.Name); err != nil {
			return nil, err
		}
	}
	if err := l.routeHost(ctx); err != nil {
		return nil, err
	}
	l.printSummary(ctx)
	return l, nil
}

func (l *Lab) saveState() error {
	if err := os.MkdirAll(l.cfg.DataDir, 0o750); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(l.state, "", "  ")
	return os.WriteFile(labStatePath(l.cfg.DataDir), append(b, '\n'), 0o644)
}

// buildNetwork creates (idempotently) the lab bridge with the server's address and, per node, a named
// network namespace joined to the bridge by a veth (eth0 inside), with its address and default route.
func (l *Lab) buildNetwork() error {
	br, gw := l.state.Bridge, l.lcfg.labIP(1)
	cmds := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", gw + "/24", "dev", br},
		{"link", "set", br, "up"},
	}
	for _, n := range l.state.Nodes {
		cmds = append(cmds,
			[]string{"netns", "add", n.Netns},
			[]string{"link", "add", n.HostIf, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
			[]string{"link", "set", n.HostIf, "master", br, "up"},
			[]string{"-n", n.Netns, "addr", "add", n.IP + "/24", "dev", "eth0"},
			[]string{"-n", n.Netns, "link", "set", "lo", "up"},
			[]string{"-n", n.Netns, "link", "set", "eth0", "up"},
			[]string{"-n", n.Netns, "route", "replace", "default", "via", gw},
		)
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") && !strings.Contains(string(out), "already assigned") {
			return fmt.Errorf("lab network: ip %s: %v: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// The host forwards between nodes' pods and the server; nodes forward for their pods.
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

// labAgent is the agent settings of lab node n beyond its identity and credentials (which a joined
// node gets from hack/install.sh): its own CNI config and pod log dirs (which `lab down` cleans), the
// lab's images and pod network (with backend), the kubelet server on its lab address, the cluster DNS.
func labAgent(cfg Config, backend string, n LabNode) agent.Config {
	a := agent.Default()
	a.NetworkBackend = backend
	a.CNIConfDir, a.Kubelet.PodLogsDir = filepath.Join(n.DataDir, "net.d"), filepath.Join(n.DataDir, "pods")
	a.ImagesDir, a.ClusterCIDR, a.Kubelet.Address = cfg.ImagesDir, cfg.ClusterCIDR, n.IP
	a.KubeletConfigFile = cfg.KubeletConfig
	cfg.kubeletDNS(&a)
	return a
}

// nodeKubeconfig issues node's client certificate and writes its kubeconfig pointing at the lab server.
func (l *Lab) nodeKubeconfig(serverDir, node, nodeDir string) (string, error) {
	saved := l.cfg
	l.cfg.DataDir, l.cfg.NodeName = serverDir, node
	defer func() { l.cfg = saved }()
	path, err := l.writeNodeKubeconfig()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(nodeDir, "kubelet.kubeconfig")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return dst, os.WriteFile(dst, b, 0o600)
}

func (l *Lab) waitReady(ctx context.Context, node string) error {
	return poll(ctx, l.cfg.NodeTimeout, "node "+node+" to be Ready", func() (bool, string, error) {
		n, err := l.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return nodeStatus(n) == "Ready", nodeStatus(n), nil
	})
}

// routeHost runs the agents' route controller (podroutes) in the host's namespace, which holds the
// server and no Node: the host routes every node's podCIDR via its lab address, as each node's agent does
// for the other nodes, so that the API server reaches pods (webhooks, proxy) and `curl` from the host works.
func (l *Lab) routeHost(ctx context.Context) error {
	_, cidr, err := net.ParseCIDR(l.cfg.ClusterCIDR)
	if err != nil {
		return fmt.Errorf("lab: cluster CIDR: %w", err)
	}
	rc, err := podroutes.New(podroutes.Config{Client: l.Client, ClusterCIDR: cidr, Logger: l.cfg.Logger})
	if err != nil {
		return err
	}
	go func() { _ = rc.Run(ctx) }()
	return nil
}

func (l *Lab) printSummary(ctx context.Context) {
	w := l.cfg.Out
	fmt.Fprintf(w, "\nnodekit lab is up: %d nodes on bridge %s, data in %s\n\n", len(l.state.Nodes), l.state.Bridge, l.cfg.DataDir)
	fmt.Fprintf(w, "  kubectl  export KUBECONFIG=%s; kubectl get nodes -o wide\n", l.AdminKubeconfig)
	cli := cliWithDataDir(l.cfg.CLI, l.cfg.DataDir, DefaultLabDataDir)
	fmt.Fprintf(w, "  exec     %s lab exec %s -- ip addr\n", cli, l.state.Nodes[0].Name)
	fmt.Fprintf(w, "  down     %s lab down\n", cli)
	for _, n := range l.state.Nodes {
		if !n.Join {
			continue
		}
		// As on a real machine, but installed under the node's data dir (the namespaces share the host's
		// file system) and started by hand the way the unit would (no systemd in a lab node).
		bin, root := filepath.Dir(l.cfg.Executable), filepath.Join(n.DataDir, "root")
		// The checkout's installer when nodekit runs from its bin/ (make up, make build), so the line works
		// from any directory.
		installer := "hack/install.sh"
		if p := filepath.Clean(filepath.Join(bin, "..", "hack", "install.sh")); isFile(p) {
			installer = p
		}
		path := ""
		if l.cfg.Containerd != "" {
			path = "PATH=" + filepath.Dir(l.cfg.Containerd) + ":$PATH "
		}
		fmt.Fprintf(w, "  join     %s token create --kubeconfig %s   # prints TOKEN, then an agent command line with the sha256:HASH\n", l.cfg.CLI, l.AdminKubeconfig)
		fmt.Fprintf(w, "           %s lab exec %s -- env DESTDIR=%s NODEKIT_SKIP_DEPS=1 NODEKIT_DATA_DIR=%s NODEKIT_BIN_DIR=%s \\\n"+
			"             %s agent --server %s --token TOKEN --ca-hash HASH --node-name %s --node-ip %s -- %s\n",
			cli, n.Name, root, n.DataDir, bin, installer, l.rest.Host, n.Name, n.IP, strings.Join(n.JoinArgs, " "))
		fmt.Fprintf(w, "           %s lab exec %s -- sh -c 'set -a; . %s/etc/nodekit/agent.env; %sexec %s/usr/local/bin/nodekit agent --data-dir \"$NODEKIT_DATA_DIR\" $NODEKIT_AGENT_ARGS'\n",
			cli, n.Name, root, path, root)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tINTERNAL-IP\tPOD-CIDR\tNETNS")
	for _, n := range l.state.Nodes {
		node, err := l.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			node = &v1.Node{}
		}
		status := nodeStatus(node)
		if n.Join && node.Name == "" {
			status = "(no agent: join it)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, status, n.IP, node.Spec.PodCIDR, n.Netns)
	}
	tw.Flush()
}

// Stop stops the lab's processes and records that no `lab up` runs.
func (l *Lab) Stop() {
	l.Cluster.Stop()
	l.state.UpPID = 0
	_ = l.saveState()
}

// Run supervises until ctx ends, then stops.
func (l *Lab) Run(ctx context.Context) {
	<-ctx.Done()
	l.Stop()
}

// StopNode stops one node's agent (SIGTERM, then SIGKILL after the grace), as a node that
// goes away: its Node turns NotReady and its pods are replaced elsewhere.
func (l *Lab) StopNode(node string) error {
	found := false
	for _, c := range l.components {
		if c.name == node+"-agent" {
			c.stop(l.cfg.StopTimeout)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("lab: no node %q", node)
	}
	return nil
}

// LabExec runs argv inside node's network namespace with the caller's stdio and returns its error.
func LabExec(dataDir, node string, argv []string) error {
	st, err := ReadLabState(dataDir)
	if err != nil {
		return fmt.Errorf("lab exec: no lab in %s: %w", dataDir, err)
	}
	for _, n := range st.Nodes {
		if n.Name == node {
			cmd := exec.Command("nsenter", append([]string{"--net=" + netnsPath(n.Netns), "--"}, argv...)...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			return cmd.Run()
		}
	}
	var names []string
	for _, n := range st.Nodes {
		names = append(names, n.Name)
	}
	return fmt.Errorf("lab exec: no node %q (nodes: %s)", node, strings.Join(names, ", "))
}

// LabDown stops a running `lab up`, runs `nodekit down --purge` inside every node's namespace (pods,
// containerd, the node's rules, bridge and data), deletes the namespaces, veths and the lab bridge, and
// removes the lab's data directory.
func LabDown(ctx context.Context, dataDir string, exe string, log *slog.Logger) error {
	dd, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	st, err := ReadLabState(dd)
	if errors.Is(err, os.ErrNotExist) {
		log.Info("no lab here", "dir", dd)
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	if st.UpPID != 0 && processAlive(st.UpPID, "up") {
		log.Info("stopping nodekit lab up", "pid", st.UpPID)
		errs = append(errs, terminate(st.UpPID, 2*time.Minute))
	}
	// Children a killed `lab up` left behind (their command lines name the lab's data dir).
	pidFiles, _ := filepath.Glob(LayoutOf(dd).PIDFile("*"))
	for _, f := range pidFiles {
		if pid := readPID(f); pid != 0 && processUsesPrefix(pid, dd) {
			log.Info("stopping component", "proc", strings.TrimSuffix(filepath.Base(f), ".pid"), "pid", pid)
			errs = append(errs, terminate(pid, time.Minute))
		}
	}
	for _, n := range st.Nodes {
		if _, err := os.Stat("/run/netns/" + n.Netns); err == nil {
			log.Info("removing node", "node", n.Name)
			out, err := exec.CommandContext(ctx, "nsenter", "--net="+netnsPath(n.Netns), "--", exe, "down", cli.Flag(FlagPurge), cli.Flag(cli.FlagDataDir), n.DataDir).CombinedOutput()
			if err != nil {
				errs = append(errs, fmt.Errorf("down in %s: %v: %s", n.Name, err, out))
			}
			if out, err := exec.Command("ip", "netns", "del", n.Netns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", n.Netns, err, out))
			}
		}
		_ = exec.Command("ip", "link", "del", n.HostIf).Run()
	}
	// The shims of the pods just removed exit on their own, shortly after their containerd stops.
	if left := waitProcessesGone(dd, 15*time.Second); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes still use %s after 15s: pids %v", dd, left))
	}
	// The server made nothing outside its data dir; the host routes via the lab bridge go with it.
	if out, err := exec.Command("ip", "link", "del", st.Bridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find") {
		errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", st.Bridge, err, out))
	}
	errs = append(errs, os.RemoveAll(dd))
	return errors.Join(errs...)
}

// processUsesPrefix reports whether pid runs nodekit with an absolute-path argument under dir.
func processUsesPrefix(pid int, dir string) bool {
	for _, a := range nodekitArgs(pid) {
		if strings.HasPrefix(a, "/") && within(a, dir) {
			return true
		}
	}
	return false
}

// waitProcessesGone waits up to timeout until no process names dir on its command line (this process
// and its ancestors, e.g. a shell running `lab down`, aside) and returns the PIDs still left.
func waitProcessesGone(dir string, timeout time.Duration) []int {
	self := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !self[pid]; pid = parentPID(pid) {
		self[pid] = true
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || self[pid] {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if cl := string(b); err == nil && (strings.Contains(cl, dir+"/") || strings.Contains(cl, dir+"\x00")) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parentPID reads pid's parent from /proc/<pid>/stat (0 if unknown).
func parentPID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses, so split after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// netnsPath is where `ip netns add` pins the named network namespace.
func netnsPath(name string) string { return filepath.Join("/run/netns", name) }

// isFile reports whether path names a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
