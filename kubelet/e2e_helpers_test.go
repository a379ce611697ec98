package kubelet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/kubelet/metrics"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// testNS is the namespace the e2e pods live in.
const testNS = "default"

func randSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// node is a kubelet under test on a private containerd, with its own root dir, pod log dir and cgroup
// root, so that parallel test binaries never share anything, talking to a real API server (embedded
// etcd + nodekit's apiserver) with node credentials.
type node struct {
	t          *testing.T
	rt         *containerd.Runtime
	api        *apiserver.Server
	client     kubernetes.Interface // admin, for the test's own actions
	nodeClient kubernetes.Interface // system:node:<name>, for the kubelet
	name       string
	rootDir    string
	logDir     string
	cgroupRoot string

	// prober, when set before start, is plugged into the kubelet as its ProbeManager.
	prober kubelet.ProbeManager
	// metrics, when set before start, receives the kubelet's metrics.
	metrics *metrics.Metrics

	mu     sync.Mutex
	kl     *kubelet.Kubelet // the in-process kubelet, while running
	cancel context.CancelFunc
	done   chan error
	child  *exec.Cmd
}

// newNode starts the API server, containerd and (unless noStart) the kubelet, and registers the Node
// with an InternalIP (the node half's job in production).
func newNode(t *testing.T, noStart bool) *node {
	t.Helper()
	return newNodeWith(t, noStart, containerd.Options{})
}

// newNodeWith is newNode with containerd options (e.g. another CNI network).
func newNodeWith(t *testing.T, noStart bool, opts containerd.Options) *node {
	t.Helper()
	sfx := randSuffix()
	n := &node{t: t, name: "kl-" + sfx, cgroupRoot: "/nodekit-kl-" + sfx}
	// Registered first, so it runs last: after containerd removed every pod.
	t.Cleanup(func() { removeCgroupTree(t, n.cgroupRoot) })
	n.rt = containerd.Start(t, opts)
	if os.Getenv(fakeAPIEnv) != "" {
		c := fake.NewSimpleClientset()
		n.client, n.nodeClient = c, c
	} else {
		n.api = apiserver.Start(t, apiserver.Options{})
		n.client = n.api.Client
		n.nodeClient = kubernetes.NewForConfigOrDie(withKubeletQPS(n.api.NodeConfig(t, n.name)))
	}
	dir := t.TempDir()
	n.rootDir, n.logDir = filepath.Join(dir, "kubelet"), filepath.Join(dir, "pods-logs")
	ctx := context.Background()
	nd, err := n.client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nd.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}}
	if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.stop)
	t.Cleanup(n.killChild)
	if !noStart {
		n.start()
	}
	return n
}

func (n *node) config(client kubernetes.Interface, cri *cri.Client, log *slog.Logger) kubelet.Config {
	return kubelet.Config{
		NodeName: n.name, Runtime: cri.Runtime(), Images: cri.Image(), Client: client,
		RootDir: n.rootDir, PodLogsDir: n.logDir, CgroupRoot: n.cgroupRoot,
		HousekeepingPeriod: time.Second, GCPeriod: 5 * time.Second, Logger: log,
	}
}

// start runs a fresh Kubelet in this process (a restart after stop or killChild).
func (n *node) start() {
	n.t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{n.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := n.config(n.nodeClient, n.rt.CRI, log)
	cfg.ProbeManager = n.prober
	cfg.Metrics = n.metrics
	kl, err := kubelet.New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kl.Run(ctx) }()
	n.mu.Lock()
	n.kl, n.cancel, n.done = kl, cancel, done
	n.mu.Unlock()
}

// stop stops the in-process kubelet (pods keep running in containerd).
func (n *node) stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			n.t.Errorf("kubelet Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		n.t.Errorf("kubelet did not stop within 30s")
	}
}

// fakeAPIEnv, when set, makes the tests use client-go's fake clientset instead of the real API server
// (for bisecting an API server problem; the fake has no graceful deletion, field selectors or
// cross-process access, so tests that need those adapt or skip).
const fakeAPIEnv = "NODEKIT_KUBELET_E2E_FAKE_API"

// withKubeletQPS sets the kubelet's API client rate limits to upstream's defaults (kubeAPIQPS 50,
// kubeAPIBurst 100) instead of client-go's 5/10.
func withKubeletQPS(c *rest.Config) *rest.Config {
	c.QPS, c.Burst = 50, 100
	return c
}

// childEnv carries a child kubelet's settings (see TestMain).
const childEnv = "NODEKIT_KUBELET_E2E_CHILD"

type childSpec struct {
	Node, Kubeconfig, Endpoint, RootDir, LogDir, CgroupRoot string
}

// startChild runs the kubelet in a child process (this test binary, see TestMain), so that it can be
// killed with SIGKILL.
func (n *node) startChild() {
	n.t.Helper()
	if n.api == nil {
		// The fake API lives in this process only: run the first kubelet here too.
		n.start()
		return
	}
	spec, _ := json.Marshal(childSpec{Node: n.name, Kubeconfig: n.api.NodeKubeconfig(n.t, n.name), Endpoint: n.rt.Endpoint(),
		RootDir: n.rootDir, LogDir: n.logDir, CgroupRoot: n.cgroupRoot})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = testWriter{n.t}, testWriter{n.t}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.child = cmd
	n.mu.Unlock()
}

// killChild kills the child kubelet with SIGKILL (kill -9) and reaps it.
func (n *node) killChild() {
	if n.api == nil {
		n.stop()
		return
	}
	n.mu.Lock()
	cmd := n.child
	n.child = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// runChild is the child process's main: a kubelet with the spec from the environment, until killed.
func runChild(spec string) {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		panic(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	c, err := cri.Dial(ctx, s.Endpoint)
	if err != nil {
		panic(err)
	}
	n := &node{name: s.Node, rootDir: s.RootDir, logDir: s.LogDir, cgroupRoot: s.CgroupRoot}
	kl, err := kubelet.New(n.config(kubernetes.NewForConfigOrDie(withKubeletQPS(cfg)), c, slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		panic(err)
	}
	if err := kl.Run(ctx); err != nil {
		panic(err)
	}
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
		return
	}
	os.Exit(m.Run())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// removeCgroupTree removes the test's cgroup root from every v1 hierarchy, deepest first.
func removeCgroupTree(t *testing.T, root string) {
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctrls {
		if !c.IsDir() {
			continue
		}
		base := filepath.Join("/sys/fs/cgroup", c.Name(), root)
		var dirs []string
		_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

// demoPod is a pod running the demo server with the downward-API env it reports.
func (n *node) demoPod(name string, args ...string) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name + "-" + randSuffix()), Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			NodeName:                      n.name,
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent, Args: args,
				Env: []v1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}

func (n *node) create(pod *v1.Pod) *v1.Pod {
	n.t.Helper()
	p, err := n.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return p
}

// deleteGracefully deletes the pod with a grace period; the API server sets its deletionTimestamp and
// the kubelet completes the deletion once the containers stopped.
func (n *node) deleteGracefully(name string, grace int64) {
	n.t.Helper()
	if n.api == nil {
		// The fake clientset deletes at once; do what the API server does for a graceful delete.
		ctx := context.Background()
		p, err := n.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			n.t.Fatal(err)
		}
		now := metav1.Now()
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
		if _, err := n.client.CoreV1().Pods(testNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			n.t.Fatal(err)
		}
		return
	}
	if err := n.client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		n.t.Fatal(err)
	}
}

// waitPod polls the pod until cond holds, failing after timeout with the last status.
func (n *node) waitPod(name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	var last *v1.Pod
	for time.Now().Before(deadline) {
		p, err := n.client.CoreV1().Pods(testNS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if cond(p) {
				return p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last != nil {
		n.t.Fatalf("pod %s: timed out after %v waiting for %s; phase=%s status=%+v", name, timeout, what, last.Status.Phase, last.Status.ContainerStatuses)
	}
	n.t.Fatalf("pod %s: timed out after %v waiting for %s", name, timeout, what)
	return nil
}

func (n *node) waitGone(name string, timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, err := n.client.CoreV1().Pods(testNS).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.t.Fatalf("pod %s still exists after %v", name, timeout)
}

func running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func condition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// criID strips the "<runtime>://" prefix of a status containerID.
func criID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}

// exec runs cmd in the container through CRI ExecSync and fails on a non-zero exit.
func (n *node) exec(containerID string, cmd ...string) string {
	n.t.Helper()
	out, errOut, code := n.rt.Exec(n.t, criID(containerID), cmd...)
	if code != 0 {
		n.t.Fatalf("exec %v: exit %d: %s", cmd, code, errOut)
	}
	return out
}

// podContainers lists the CRI containers of a pod (all states).
func (n *node) podContainers(uid string) []*runtimeapi.Container {
	n.t.Helper()
	resp, err := n.rt.CRI.Runtime().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}},
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.Containers
}

func (n *node) events(name string) []string {
	n.t.Helper()
	list, err := n.client.CoreV1().Events(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// httpGet is containerd.HTTPGet trimmed.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	return strings.TrimSpace(containerd.HTTPGet(t, url))
}
