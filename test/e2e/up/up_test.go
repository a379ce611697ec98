// Package up is the end-to-end test of `nodekit up` and `nodekit down --purge`: the real binary, a real
// embedded etcd and API server, the agent with its managed containerd, nodekit-cni and its iptables proxy,
// on this host.
//
// Environment: NODEKIT_BIN names a directory holding prebuilt nodekit and nodekit-cni (default: built
// into a temporary directory); NODEKIT_CONTAINERD names the containerd binary the agent manages
// (default: containerd from PATH).
package up

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/examples"
	proxyipt "github.com/nodekit/nodekit/proxy/iptables"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/server"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

const demoSelector = "app.kubernetes.io/name=" + examples.DemoName

// TestUpDemoAndPurge runs `nodekit up` on a fresh data dir and asserts the demo end to end: the node
// Ready, 3 Ready demo pods, the demo Service answering through its ClusterIP from the host and from a
// pod's network namespace with all 3 backends seen, `kubectl top` (assertTop), the cluster DNS
// (CoreDNS, assertClusterDNS), a killed demo container brought back to 3 Ready, a ReplicationController's
// life cycle (assertReplicationController), a CPU-bound Deployment scaled to its maximum by a
// HorizontalPodAutoscaler made with kubectl autoscale (startHPA, assertHPA); then SIGINT stops `up` cleanly, a second `up` with
// --disable coredns,metrics resumes from the same etcd data (same pods' Deployment UID), removes the DNS
// add-on and serves no metrics.k8s.io, and `nodekit down --purge` leaves nothing: no process, mount, netns, bridge, iptables chain, conflist,
// pod log directory or data directory.
func TestUpDemoAndPurge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nodekit up needs root (containerd, netns, iptables)")
	}
	bin := binaries(t)
	images := ctrfw.ImagesDir(t)
	e := newEnv(t, bin, images)
	e.writeResolvConf(t)
	// Pods reach the API server (CoreDNS reads Services through it) at the kubernetes Service's
	// endpoint, the advertise address: it must not be loopback, so the API server binds every address
	// (on its random port) and advertises the host's first one.
	e.bindAddress = "0.0.0.0"

	up := e.startUp(t)
	client := e.client(t)
	ctx := context.Background()

	// The node.
	node := e.waitNodeReady(t, client)
	t.Logf("node %s Ready, podCIDR %s", node.Name, node.Spec.PodCIDR)

	// 3 Ready demo pods.
	pods := e.waitDemoReady(t, client, 3, nil)
	// A CPU-burning Deployment under a HorizontalPodAutoscaler, checked by assertHPA below.
	e.startHPA(t, client)
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	dep, err := client.AppsV1().Deployments(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !e.serviceNet.Contains(net.ParseIP(svc.Spec.ClusterIP)) {
		t.Errorf("demo ClusterIP %s is outside --service-cluster-ip-range %s", svc.Spec.ClusterIP, e.serviceNet)
	}
	url := cluster.ServiceURL(svc)

	// The Service from the host: every backend answers within a bounded number of requests.
	e.assertAllBackends(t, "host", url, names, func() (string, error) { return cluster.Get(ctx, url, 5*time.Second) })

	// The Service from a pod: the request leaves the pod's network namespace (nsenter into a demo
	// container's netns), crosses the bridge and is DNATed by the proxy's rules.
	rt := e.cri(t)
	ctrs := e.demoContainers(t, rt)
	pid := containerPID(t, rt, ctrs[0].Id)
	netnsOfPods := map[string]bool{}
	containerProcs := map[int]string{}
	for _, c := range ctrs {
		cpid := containerPID(t, rt, c.Id)
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cpid)); err == nil {
			netnsOfPods[l] = true
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cpid)); err == nil {
			containerProcs[cpid] = strings.ReplaceAll(string(b), "\x00", " ")
		}
	}
	e.assertAllBackends(t, "pod "+ctrs[0].Labels["io.kubernetes.pod.name"], url, names, func() (string, error) {
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "--", "curl", "-sS", "--max-time", "5", url).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	})

	// kubectl top: the resource metrics API, with its RBAC.
	e.assertTop(t, client)

	// Cluster DNS, in a demo pod and from the host.
	e.assertClusterDNS(t, client, rt, ctrs[0].Id)

	// The control plane in kube-system: mirror pods of the component processes.
	e.assertComponentPods(t, client, dep.Spec.Template)

	// Kill one demo container: the kubelet restarts it and the Deployment is back to 3 Ready.
	victim := ctrs[0]
	before := restartCount(t, client, victim.Labels["io.kubernetes.pod.name"])
	t.Logf("stopping container %s of pod %s through CRI", victim.Id[:12], victim.Labels["io.kubernetes.pod.name"])
	if _, err := rt.Runtime().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: victim.Id, Timeout: 0}); err != nil {
		t.Fatalf("CRI StopContainer: %v", err)
	}
	e.waitDemoReady(t, client, 3, func(ps []v1.Pod) (bool, string) {
		for _, p := range ps {
			if p.Name == victim.Labels["io.kubernetes.pod.name"] {
				n := int32(0)
				for _, cs := range p.Status.ContainerStatuses {
					n += cs.RestartCount
				}
				return n > before, fmt.Sprintf("restartCount of %s: %d (was %d)", p.Name, n, before)
			}
		}
		return true, "the killed pod was replaced"
	})

	// A ReplicationController on the real node: up, scaled, self-healing, orphaned, adopted, deleted.
	e.assertReplicationController(t, client, rt, dep.Spec.Template)
	rt.Close()

	// The autoscaler started above scaled its Deployment to maxReplicas (assertHPA).
	e.assertHPA(t, client)

	// SIGINT: up stops its children (agent, server) and exits 0.
	up.interrupt(t)

	// A second up resumes from the same etcd: the same Deployment (same UID), 3 Ready pods; with
	// --disable coredns,metrics its server removes the DNS add-on and does not serve metrics.k8s.io.
	e.extraArgs = []string{"--disable", addons.CoreDNS + "," + addons.Metrics}
	up2 := e.startUp(t)
	client = e.client(t)
	e.waitNodeReady(t, client)
	e.waitDemoReady(t, client, 3, nil)
	e.waitCoreDNSRemoved(t, client)
	e.assertMetricsDisabled(t, client)
	dep2, err := client.AppsV1().Deployments(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep2.UID != dep.UID {
		t.Errorf("after restart the demo Deployment has UID %s, want %s (state not resumed from etcd)", dep2.UID, dep.UID)
	}
	if !strings.Contains(up2.stdout(), "nodekit is up") {
		t.Errorf("second up printed no summary:\n%s", up2.stdout())
	}
	procs := e.processesUsingDataDir()
	if len(procs) == 0 {
		t.Fatalf("no process mentions %s while up runs", e.dataDir)
	}
	// The demo containers of the first run (two of them kept running across the restart).
	for pid, cl := range containerProcs {
		procs[pid] = cl
	}

	// down --purge while up runs: it stops up, then removes everything.
	e.down(t)
	up2.waitExit(t, 30*time.Second)
	e.assertNothingLeft(t, procs, netnsOfPods, svc.Spec.ClusterIP)
}

// env is one test cluster's settings and scratch paths.
type env struct {
	bin, images, containerd string
	dataDir, cniConfDir     string
	podLogsDir              string
	apiPort, kubeletPort    int
	etcdAddr, proxyMetrics  string
	proxyHealthz            string
	serviceCIDR, podCIDR    string
	serviceNet              *net.IPNet
	nodeName                string
	// downOutput is what the last `nodekit down --purge` printed, shown when something is left behind.
	downOutput string
	// resolvConf is the kubelet's --resolv-conf (writeResolvConf); extraArgs are added to up's flags.
	resolvConf string
	extraArgs  []string
	// kubeletConfig is up's --kubelet-config: the harness settings of test/framework/agent (no image GC,
	// only a memory eviction threshold), so the host disk's fill level never taints the node.
	kubeletConfig string
	// bindAddress is the API server\'s --bind-address (default 127.0.0.1).
	bindAddress    string
	purged, dumped bool
}

func newEnv(t *testing.T, bin, images string) *env {
	// A short path: containerd's socket path must fit in sun_path (108 bytes).
	base, err := os.MkdirTemp("", "nkup-")
	if err != nil {
		t.Fatal(err)
	}
	n := rand.IntN(200) + 20
	e := &env{
		bin: bin, images: images, containerd: os.Getenv("NODEKIT_CONTAINERD"),
		dataDir: filepath.Join(base, "data"), cniConfDir: filepath.Join(base, "net.d"), podLogsDir: filepath.Join(base, "pods"),
		apiPort: freePort(t), kubeletPort: freePort(t), etcdAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		proxyMetrics: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		proxyHealthz: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		// Unique ranges so that this run's rules and routes never match another test's.
		serviceCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+rand.IntN(50), n), podCIDR: fmt.Sprintf("10.%d.0.0/16", 200+rand.IntN(50)),
		nodeName: fmt.Sprintf("nkup-%d", rand.IntN(1e6)),
	}
	_, e.serviceNet, _ = net.ParseCIDR(e.serviceCIDR)
	if e.kubeletConfig, err = fwagent.WriteKubeletConfig(base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !e.purged {
			if t.Failed() {
				e.dumpLogs(t)
			}
			e.down(t)
		}
		os.RemoveAll(base)
	})
	return e
}

func (e *env) upArgs() []string {
	bind := e.bindAddress
	if bind == "" {
		bind = "127.0.0.1"
	}
	args := []string{"up", "--data-dir", e.dataDir, "--node-name", e.nodeName, "--node-ip", "127.0.0.1",
		"--bind-address", bind, "--secure-port", strconv.Itoa(e.apiPort), "--etcd-listen-client", e.etcdAddr,
		"--service-cluster-ip-range", e.serviceCIDR, "--cluster-cidr", e.podCIDR,
		"--kubelet-address", "127.0.0.1", "--kubelet-port", strconv.Itoa(e.kubeletPort),
		"--proxy-metrics-bind-address", e.proxyMetrics, "--proxy-healthz-bind-address", e.proxyHealthz, "--images-dir", e.images,
		"--cni-conf-dir", e.cniConfDir, "--pod-logs-dir", e.podLogsDir,
		"--node-timeout", "3m", "--demo-timeout", "3m", "--component-log-level", "error"}
	if e.containerd != "" {
		args = append(args, "--containerd", e.containerd)
	}
	if e.resolvConf != "" {
		args = append(args, "--resolv-conf", e.resolvConf)
	}
	args = append(args, "--kubelet-config", e.kubeletConfig)
	return append(args, e.extraArgs...)
}

// upProc is a running `nodekit up`.
type upProc struct {
	cmd              *exec.Cmd
	out, errb        *syncBuffer
	done             chan struct{}
	exitErr          error
	stoppedByTheTest bool
}

func (u *upProc) stdout() string { return u.out.String() }

// startUp runs `nodekit up` and waits (up to 8 minutes: image import, containerd, 3 pods on a loaded
// box) for its summary on stdout.
func (e *env) startUp(t *testing.T) *upProc {
	t.Helper()
	u := &upProc{cmd: exec.Command(filepath.Join(e.bin, "nodekit"), e.upArgs()...), out: &syncBuffer{}, errb: &syncBuffer{}, done: make(chan struct{})}
	u.cmd.Stdout, u.cmd.Stderr = u.out, u.errb
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { u.exitErr = u.cmd.Wait(); close(u.done) }()
	t.Cleanup(func() {
		select {
		case <-u.done:
		default:
			_ = u.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-u.done:
			case <-time.After(2 * time.Minute):
				_ = u.cmd.Process.Kill()
				<-u.done
			}
		}
	})
	deadline := time.Now().Add(8 * time.Minute)
	for !strings.Contains(u.stdout(), "nodekit is up") {
		select {
		case <-u.done:
			e.dumpLogs(t)
			t.Fatalf("nodekit up exited before its summary: %v\nstdout:\n%s\nstderr:\n%s", u.exitErr, u.stdout(), tail(u.errb.String(), 80))
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			e.dumpLogs(t)
			t.Fatalf("nodekit up printed no summary within 8m\nstderr:\n%s", tail(u.errb.String(), 80))
		}
	}
	t.Logf("nodekit up:\n%s", u.stdout())
	return u
}

// interrupt sends SIGINT and expects a clean exit 0 with every child stopped.
func (u *upProc) interrupt(t *testing.T) {
	t.Helper()
	_ = u.cmd.Process.Signal(syscall.SIGINT)
	u.waitExit(t, 3*time.Minute)
	if u.exitErr != nil {
		t.Errorf("nodekit up after SIGINT: %v\n%s", u.exitErr, tail(u.errb.String(), 40))
	}
	for _, comp := range []string{"agent", "server"} {
		if !regexp.MustCompile(`msg="component stopped" proc=` + comp + ` pid=\d+ status="exit status 0"`).MatchString(u.errb.String()) {
			t.Errorf("nodekit up did not report %s stopped with status 0:\n%s", comp, tail(u.errb.String(), 30))
		}
	}
	// Reverse order: the agent stops before the server.
	log := u.errb.String()
	if a, s := strings.Index(log, `"stopping component" proc=agent`), strings.Index(log, `"stopping component" proc=server`); a < 0 || s < 0 || a > s {
		t.Errorf("components not stopped agent-before-server:\n%s", tail(log, 30))
	}
}

func (u *upProc) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-u.done:
	case <-time.After(timeout):
		t.Fatalf("nodekit up still runs %s after being asked to stop\n%s", timeout, tail(u.errb.String(), 40))
	}
}

// restConfig is the admin client config of e's data dir.
func restConfig(t *testing.T, e *env) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", server.Config{DataDir: e.dataDir}.Paths().AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 15 * time.Second
	return rc
}

func (e *env) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(t, e))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (e *env) cri(t *testing.T) *cri.Client {
	t.Helper()
	c, err := cri.Dial(context.Background(), "unix://"+agent.Config{DataDir: e.dataDir}.Paths().ContainerdSocket)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) waitNodeReady(t *testing.T, client kubernetes.Interface) *v1.Node {
	t.Helper()
	var node *v1.Node
	e.waitFor(t, client, 3*time.Minute, "node "+e.nodeName+" Ready", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(context.Background(), e.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("%s %s", c.Status, c.Message)
			}
		}
		return false, "no Ready condition"
	})
	return node
}

// waitDemoReady waits for exactly want demo pods, all Running and Ready, and for extra (if set).
func (e *env) waitDemoReady(t *testing.T, client kubernetes.Interface, want int, extra func([]v1.Pod) (bool, string)) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	e.waitFor(t, client, 4*time.Minute, fmt.Sprintf("%d Ready demo pods", want), func() (bool, string) {
		l, err := client.CoreV1().Pods(examples.DemoNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: demoSelector})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		var active []v1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			active = append(active, p)
			if p.Status.Phase == v1.PodRunning && podReady(&p) {
				ready++
			}
		}
		pods = active
		if len(active) != want || ready != want {
			return false, fmt.Sprintf("%d pods, %d Ready", len(active), ready)
		}
		if extra != nil {
			return extra(active)
		}
		return true, ""
	})
	return pods
}

// assertAllBackends sends up to 60 requests through the Service and expects an answer from every pod in
// names ("demo-server v1 pod=<name> ...").
func (e *env) assertAllBackends(t *testing.T, from, url string, names map[string]bool, get func() (string, error)) {
	t.Helper()
	seen := map[string]int{}
	podRE := regexp.MustCompile(`^demo-server v1 pod=(\S+) `)
	var lastErr error
	for i := 0; i < 60 && len(seen) < len(names); i++ {
		body, err := get()
		if err != nil {
			lastErr = fmt.Errorf("%v: %s", err, body)
			time.Sleep(time.Second)
			continue
		}
		m := podRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("from %s: GET %s answered %q, not the demo server's identity line", from, url, body)
		}
		if !names[m[1]] {
			t.Errorf("from %s: answer from pod %q, which is not one of the demo pods %v", from, m[1], keys(names))
		}
		seen[m[1]]++
	}
	if len(seen) < len(names) {
		t.Fatalf("from %s: %s answered from %d of %d backends (%v); last error: %v", from, url, len(seen), len(names), seen, lastErr)
	}
	t.Logf("from %s: %s answered from all %d backends: %v", from, url, len(names), seen)
}

func (e *env) demoContainers(t *testing.T, rt *cri.Client) []*runtimeapi.Container {
	t.Helper()
	ctrs := runningContainers(t, rt, "demo-server")
	if len(ctrs) != 3 {
		t.Fatalf("%d running demo containers in CRI, want 3", len(ctrs))
	}
	return ctrs
}

// runningContainers lists the running containers named name of the demo namespace's pods in CRI.
func runningContainers(t *testing.T, rt *cri.Client, name string) []*runtimeapi.Container {
	t.Helper()
	resp, err := rt.Runtime().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": examples.DemoNamespace, "io.kubernetes.container.name": name},
	}})
	if err != nil {
		t.Fatalf("CRI ListContainers: %v", err)
	}
	return resp.Containers
}

// containerPID reads the container's init PID from the CRI verbose status (containerd's "info.pid").
func containerPID(t *testing.T, rt *cri.Client, id string) int {
	t.Helper()
	st, err := rt.Runtime().ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("CRI ContainerStatus %s: %v", id, err)
	}
	m := regexp.MustCompile(`"pid":\s*(\d+)`).FindStringSubmatch(st.Info["info"])
	if m == nil {
		t.Fatalf("no pid in the verbose status of %s: %.300s", id, st.Info["info"])
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func restartCount(t *testing.T, client kubernetes.Interface, pod string) int32 {
	t.Helper()
	p, err := client.CoreV1().Pods(examples.DemoNamespace).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func (e *env) down(t *testing.T) {
	t.Helper()
	if e.purged {
		return
	}
	e.purged = true
	cmd := exec.Command(filepath.Join(e.bin, "nodekit"), "down", "--purge", "--data-dir", e.dataDir)
	out, err := cmd.CombinedOutput()
	e.downOutput = string(out)
	if err != nil {
		t.Errorf("nodekit down --purge: %v\n%s", err, tail(string(out), 40))
	}
}

// processesUsingDataDir lists the PIDs whose command line names the data dir (up's children, containerd,
// the shims) with their command lines.
func (e *env) processesUsingDataDir() map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if cl := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cl, e.dataDir) {
			out[pid] = cl
		}
	}
	return out
}

func (e *env) assertNothingLeft(t *testing.T, procs map[int]string, netns map[string]bool, clusterIP string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("nodekit down --purge printed:\n%s", tail(e.downOutput, 60))
		}
	}()
	for pid, cl := range procs {
		if syscall.Kill(pid, 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.ReplaceAll(string(b), "\x00", " ") == cl {
				t.Errorf("process %d still runs after down --purge: %s", pid, cl)
			}
		}
	}
	if left := e.processesUsingDataDir(); len(left) > 0 {
		t.Errorf("processes naming the data dir after down --purge: %v", left)
	}
	if _, err := os.Stat(e.dataDir); !os.IsNotExist(err) {
		t.Errorf("data dir %s still exists after down --purge (%v)", e.dataDir, err)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), e.dataDir) {
		t.Errorf("mounts under %s remain:\n%s", e.dataDir, grepLines(string(b), e.dataDir))
	}
	if _, err := os.Stat(filepath.Join(e.cniConfDir, "10-nodekit.conflist")); !os.IsNotExist(err) {
		t.Errorf("CNI conflist still in %s (%v)", e.cniConfDir, err)
	}
	if ents, _ := os.ReadDir(e.podLogsDir); len(ents) > 0 {
		t.Errorf("pod log dirs left in %s: %v", e.podLogsDir, ents)
	}
	if out, err := exec.Command("ip", "link", "show", "nk0").CombinedOutput(); err == nil {
		t.Errorf("the node bridge nk0 still exists:\n%s", out)
	}
	// Network namespaces of the demo pods: gone from every process and from /run/netns.
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if l, err := os.Readlink(filepath.Join("/proc", d.Name(), "ns", "net")); err == nil && netns[l] {
			t.Errorf("a demo pod's network namespace %s is still used by pid %s", l, d.Name())
		}
	}
	if nsEnts, err := os.ReadDir("/run/netns"); err == nil {
		for _, n := range nsEnts {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join("/run/netns", n.Name()), &st) == nil && netns[fmt.Sprintf("net:[%d]", st.Ino)] {
				t.Errorf("a demo pod's network namespace is still pinned at /run/netns/%s", n.Name())
			}
		}
	}
	save, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v\n%s", err, save)
	}
	for _, chain := range []string{proxyipt.ChainPrefix, masq.ChainName("nodekit"), portmap.TopChain("nodekit"), clusterIP + "/32"} {
		if bytes.Contains(save, []byte(chain)) {
			t.Errorf("iptables still mentions %q after down --purge:\n%s", chain, grepLines(string(save), chain))
		}
	}
}

// waitFor polls check every second for up to timeout; on timeout it dumps the demo pods and the
// components' logs and fails with check's last detail.
func (e *env) waitFor(t *testing.T, client kubernetes.Interface, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, detail := check()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			e.dumpPods(t, client)
			e.dumpLogs(t)
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
		}
		time.Sleep(time.Second)
	}
}

func (e *env) dumpPods(t *testing.T, client kubernetes.Interface) {
	l, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	var b strings.Builder
	for _, p := range l.Items {
		fmt.Fprintf(&b, "%s/%s node=%s phase=%s ip=%s conditions=%v\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.Status.Conditions)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s ready=%t restarts=%d state=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State)
		}
	}
	t.Logf("pods:\n%s", b.String())
}

func (e *env) dumpLogs(t *testing.T) {
	if e.dumped {
		return
	}
	e.dumped = true
	for _, c := range []string{"server", "agent"} {
		b, err := os.ReadFile(cluster.LayoutOf(e.dataDir).LogFile(c))
		if err != nil {
			continue
		}
		t.Logf("--- %s.log (last 60 lines)\n%s", c, tail(string(b), 60))
	}
	// The add-ons' container logs (CoreDNS).
	logs, _ := filepath.Glob(filepath.Join(e.podLogsDir, "kube-system_*", "*", "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			t.Logf("--- %s (last 30 lines)\n%s", l, tail(string(b), 30))
		}
	}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// binaries returns the directory holding nodekit and nodekit-cni: $NODEKIT_BIN, or a build shared by the
// package's tests (removed by TestMain).
func binaries(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("NODEKIT_BIN"); d != "" {
		for _, b := range []string{"nodekit", "nodekit-cni"} {
			if _, err := os.Stat(filepath.Join(d, b)); err != nil {
				t.Fatalf("NODEKIT_BIN=%s: %v", d, err)
			}
		}
		return d
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "nkup-bin-"); buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", buildDir, "github.com/nodekit/nodekit/cmd/nodekit", "github.com/nodekit/nodekit/cmd/nodekit-cni").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func grepLines(s, sub string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// syncBuffer is a bytes.Buffer safe for a child's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
