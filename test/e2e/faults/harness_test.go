// Package faults is nodekit's fault-injection suite: one real single-node cluster (`nodekit up` as a child
// process in its own node network namespace, with its own data dir, ports, service and pod ranges, the demo Deployment of 3 and its Service)
// and, one after another, the faults a node meets: the agent stalled (SIGSTOP 60 s), the agent killed
// (-9), containerd killed, the API server killed during writes, a node reboot (agent and containerd killed,
// shims left), and pod create/delete cycles. Each fault prints its availability figure (Service requests
// answered / sent from the node's network namespace to the ClusterIP, during and after the fault, and the
// time to recover) and checks that nothing leaked afterwards (sandboxes, netns, IPAM reservations, iptables
// rules, mounts, cgroups, pod log dirs).
//
// `go test` (and `make test`) runs the acceptance-critical short faults (the 60 s stall and the agent
// kill -9 with no Ready flap) and a few pod cycles; NODEKIT_FAULTS=all (`make faults`) runs every fault,
// and NODEKIT_FAULT_CYCLES sets the number of pod create/delete cycles (default 5; `make faults`: 1000).
//
// Environment: NODEKIT_BIN names a directory holding prebuilt nodekit and nodekit-cni (default: built
// into a temporary directory); NODEKIT_CONTAINERD the containerd binary the agent manages.
package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/examples"
	"github.com/nodekit/nodekit/server"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
	"github.com/nodekit/nodekit/test/framework/netns"
)

const demoSelector = "app.kubernetes.io/name=" + examples.DemoName

// env is the suite's one cluster.
type env struct {
	// lab and node: the node's own network namespace (test/framework/netns), where `nodekit up` runs, so
	// that its bridge, routes, iptables chains and sysctls are the cluster's alone; the API client, the
	// probe and the rule checks work from inside it.
	lab                            *netns.Lab
	node                           *netns.Node
	base, bin, dataDir, podLogsDir string
	serviceNet, podNet             *net.IPNet
	nodeName                       string
	up                             *exec.Cmd
	upDone                         chan struct{}
	upLog                          *os.File
	client                         kubernetes.Interface
	url, clusterIP                 string // the demo Service's ClusterIP URL and address

	mu   sync.Mutex
	uids map[string]string // every pod UID the cluster ever had -> ns/name (from a watch)
}

var (
	shared     *env
	sharedErr  error
	sharedOnce sync.Once
)

// cluster returns the suite's cluster, started on first use (up to 10 minutes on a loaded box).
func cluster1(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("nodekit up needs root (containerd, netns, iptables)")
	}
	sharedOnce.Do(func() { shared, sharedErr = startEnv() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startEnv() (*env, error) {
	base, err := os.MkdirTemp("", "nkflt-")
	if err != nil {
		return nil, err
	}
	e := &env{base: base, dataDir: filepath.Join(base, "data"), podLogsDir: filepath.Join(base, "pods"),
		nodeName: fmt.Sprintf("nkflt-%d", rand.IntN(1e6)), uids: map[string]string{}}
	if e.bin = os.Getenv("NODEKIT_BIN"); e.bin == "" {
		e.bin = filepath.Join(base, "bin")
		// go build -o with several packages needs an existing directory.
		if err := os.MkdirAll(e.bin, 0o755); err != nil {
			os.RemoveAll(base)
			return nil, err
		}
		out, err := exec.Command("go", "build", "-o", e.bin, "github.com/nodekit/nodekit/cmd/nodekit", "github.com/nodekit/nodekit/cmd/nodekit-cni").CombinedOutput()
		if err != nil {
			os.RemoveAll(base)
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	images, err := ctrfw.BuildImages()
	if err != nil {
		os.RemoveAll(base)
		return nil, fmt.Errorf("building bundled images: %v", err)
	}
	n := rand.IntN(200) + 20
	// Ranges no other test uses (test/e2e/up: 10.100-149.x.0/24 and 10.200-249.0.0/16; labs 10.150-219),
	// so that addresses in rules, netns and the IPAM store are this cluster's.
	serviceCIDR, podCIDR := fmt.Sprintf("10.%d.%d.0/24", 90+rand.IntN(6), n), fmt.Sprintf("10.%d.0.0/16", 250+rand.IntN(5))
	_, e.serviceNet, _ = net.ParseCIDR(serviceCIDR)
	_, e.podNet, _ = net.ParseCIDR(podCIDR)
	args := []string{"up", "--data-dir", e.dataDir, "--node-name", e.nodeName, "--node-ip", "127.0.0.1",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(freePort()), "--etcd-listen-client", "127.0.0.1:" + strconv.Itoa(freePort()),
		"--service-cluster-ip-range", serviceCIDR, "--cluster-cidr", podCIDR,
		"--kubelet-address", "127.0.0.1", "--kubelet-port", strconv.Itoa(freePort()),
		"--proxy-metrics-bind-address", "127.0.0.1:" + strconv.Itoa(freePort()), "--images-dir", images,
		"--cni-conf-dir", filepath.Join(base, "net.d"), "--pod-logs-dir", e.podLogsDir,
		"--node-timeout", "5m", "--demo-timeout", "5m", "--component-log-level", "error"}
	if c := os.Getenv("NODEKIT_CONTAINERD"); c != "" {
		args = append(args, "--containerd", c)
	}
	// test/framework/agent's harness kubelet settings: the host disk's fill level never taints the node.
	kubeletConfig, err := fwagent.WriteKubeletConfig(base)
	if err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	args = append(args, "--kubelet-config", kubeletConfig)
	if e.upLog, err = os.Create(filepath.Join(base, "up.log")); err != nil {
		return nil, err
	}
	if e.lab, err = netns.New(netns.Options{}); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	if e.node, err = e.lab.AddNode("n1"); err != nil {
		e.stop()
		return nil, err
	}
	// A node has a default route; without one a ClusterIP is unreachable before the proxy's DNAT applies.
	if out, err := e.node.Command(context.Background(), "ip", "route", "add", "default", "dev", "eth0").CombinedOutput(); err != nil {
		e.stop()
		return nil, fmt.Errorf("default route in the node namespace: %v: %s", err, out)
	}
	e.up = e.node.Command(context.Background(), filepath.Join(e.bin, "nodekit"), args...)
	e.up.Stdout, e.up.Stderr = e.upLog, e.upLog
	e.up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.up.Start(); err != nil {
		return nil, err
	}
	e.upDone = make(chan struct{})
	go func() { _ = e.up.Wait(); close(e.upDone) }()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		b, _ := os.ReadFile(e.upLog.Name())
		if strings.Contains(string(b), "nodekit is up") {
			break
		}
		select {
		case <-e.upDone:
			e.stop()
			return nil, fmt.Errorf("nodekit up exited before its summary:\n%s", tail(string(b), 60))
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("nodekit up printed no summary within 10m:\n%s", tail(string(b), 60))
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", server.Config{DataDir: e.dataDir}.Paths().AdminKubeconfig)
	if err != nil {
		e.stop()
		return nil, err
	}
	rc.Timeout = 15 * time.Second
	rc.Dial = e.dial
	if e.client, err = kubernetes.NewForConfig(rc); err != nil {
		e.stop()
		return nil, err
	}
	svc, err := e.client.CoreV1().Services(examples.DemoNamespace).Get(context.Background(), examples.DemoName, metav1.GetOptions{})
	if err != nil {
		e.stop()
		return nil, err
	}
	e.url, e.clusterIP = cluster.ServiceURL(svc), svc.Spec.ClusterIP
	go e.trackUIDs()
	return e, nil
}

// dial connects from inside the node's network namespace (the socket stays there).
func (e *env) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := e.node.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// trackUIDs records every pod UID the cluster ever had, so that the leak checks can look for what a
// removed pod left behind.
func (e *env) trackUIDs() {
	for {
		select {
		case <-e.upDone:
			return
		default:
		}
		w, err := e.client.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*v1.Pod); ok {
				e.mu.Lock()
				e.uids[string(p.UID)] = p.Namespace + "/" + p.Name
				e.mu.Unlock()
			}
		}
	}
}

// stop runs `nodekit down --purge` (which stops up and removes everything) and removes the scratch dir.
func (e *env) stop() {
	if e.up != nil && e.up.Process != nil {
		if out, err := e.node.Command(context.Background(), filepath.Join(e.bin, "nodekit"), "down", "--purge", "--data-dir", e.dataDir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "nodekit down --purge: %v\n%s\n", err, out)
		}
		select {
		case <-e.upDone:
		case <-time.After(time.Minute):
			_ = e.up.Process.Kill()
			<-e.upDone
		}
	}
	if e.upLog != nil {
		e.upLog.Close()
	}
	if e.lab != nil {
		if err := e.lab.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "removing the lab's namespaces: %v\n", err)
		}
	}
	os.RemoveAll(e.base)
}

// proc finds the PID of this cluster's component: "server", "agent" (nodekit children of up),
// "containerd", or "shim" (all shims; the first is returned, use procs for all).
func (e *env) procs(kind string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), e.dataDir) {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		base := filepath.Base(argv[0])
		switch {
		case kind == "shim" && strings.HasPrefix(base, "containerd-shim"):
		case kind == "containerd" && base == "containerd":
		case (kind == "server" || kind == "agent") && base == "nodekit" && len(argv) > 1 && argv[1] == kind:
		default:
			continue
		}
		out = append(out, pid)
	}
	return out
}

// pid is the one running process of kind; it fails t unless there is exactly one.
func (e *env) pid(t *testing.T, kind string) int {
	t.Helper()
	p := e.procs(kind)
	if len(p) != 1 {
		t.Fatalf("%d %s processes of the cluster, want 1: %v", len(p), kind, p)
	}
	return p[0]
}

// waitFor polls check every 200 ms up to timeout and fails t with check's last detail.
func (e *env) waitFor(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		ok, detail := check()
		if ok {
			return time.Since(start)
		}
		last = detail
		time.Sleep(200 * time.Millisecond)
	}
	e.dumpLogs(t)
	t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
	return 0
}

// waitDemoReady waits for 3 Running, Ready demo pods and the node Ready.
func (e *env) waitDemoReady(t *testing.T, timeout time.Duration) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	e.waitFor(t, timeout, "node Ready and 3 Ready demo pods", func() (bool, string) {
		n, err := e.client.CoreV1().Nodes().Get(context.Background(), e.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if c := nodeCondition(n, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
			return false, fmt.Sprintf("node Ready condition %v", c)
		}
		l, err := e.client.CoreV1().Pods(examples.DemoNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: demoSelector})
		if err != nil {
			return false, err.Error()
		}
		pods = nil
		ready := 0
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			pods = append(pods, p)
			if p.Status.Phase == v1.PodRunning && podReady(&p) {
				ready++
			}
		}
		return len(pods) == 3 && ready == 3, fmt.Sprintf("%d demo pods, %d Ready", len(pods), ready)
	})
	return pods
}

func nodeCondition(n *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// readyWatch records every demo pod status a watch delivers with Ready other than True (pods being
// deleted excepted).
type readyWatch struct {
	mu     sync.Mutex
	flaps  []string
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watchReady(t *testing.T) *readyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.client.CoreV1().Pods(examples.DemoNamespace).Watch(ctx, metav1.ListOptions{LabelSelector: demoSelector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rw := &readyWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				continue
			}
			if !podReady(p) {
				rw.mu.Lock()
				rw.flaps = append(rw.flaps, fmt.Sprintf("%s %s Ready=%v at %s", ev.Type, p.Name, readyStatus(p), time.Now().Format("15:04:05.000")))
				rw.mu.Unlock()
			}
		}
	}()
	return rw
}

func readyStatus(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return string(c.Status) + " (" + c.Reason + ")"
		}
	}
	return "absent"
}

func (rw *readyWatch) stop() []string {
	rw.cancel()
	<-rw.done
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.flaps
}

// signal sends sig to pid after checking that pid is still this cluster's kind.
func (e *env) signal(t *testing.T, kind string, pid int, sig syscall.Signal) {
	t.Helper()
	found := false
	for _, p := range e.procs(kind) {
		found = found || p == pid
	}
	if !found {
		t.Fatalf("pid %d is no longer the cluster's %s", pid, kind)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill -%d %d (%s): %v", sig, pid, kind, err)
	}
	t.Logf("%s (pid %d): %s at %s", kind, pid, sig, time.Now().Format("15:04:05.000"))
}

// waitRestarted waits until kind runs again with a PID other than old.
func (e *env) waitRestarted(t *testing.T, kind string, old int, timeout time.Duration) int {
	t.Helper()
	var pid int
	e.waitFor(t, timeout, kind+" restarted", func() (bool, string) {
		p := e.procs(kind)
		if len(p) == 1 && p[0] != old {
			pid = p[0]
			return true, ""
		}
		return false, fmt.Sprintf("%s processes %v", kind, p)
	})
	return pid
}

func (e *env) dumpLogs(t *testing.T) {
	for _, c := range []string{"server", "agent"} {
		if b, err := os.ReadFile(cluster.LayoutOf(e.dataDir).LogFile(c)); err == nil {
			t.Logf("--- %s.log (last 40 lines)\n%s", c, tail(string(b), 40))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// all reports whether the long faults run (NODEKIT_FAULTS=all, `make faults`); otherwise t is skipped.
func all(t *testing.T) {
	t.Helper()
	if os.Getenv("NODEKIT_FAULTS") != "all" {
		t.Skip("a long fault: it runs with NODEKIT_FAULTS=all (make faults)")
	}
}
