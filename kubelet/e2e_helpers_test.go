package kubelet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/kubelet/metrics"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
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

// node is the node agent under test (agent.Run, as `nodekit agent` runs it: kubelet, node status,
// kubelet server, probe manager) on a private containerd, with its own data dir, pod log dir and cgroup
// root, so that parallel test binaries never share anything, talking to a real API server (embedded
// etcd + nodekit's apiserver) with node credentials. The service proxy is off.
type node struct {
	t          *testing.T
	rt         *containerd.Runtime
	api        *apiserver.Server
	client     kubernetes.Interface // admin, for the test's own actions
	name       string
	cfg        agent.Config // the agent's, kept across restarts
	rootDir    string
	logDir     string
	cgroupRoot string

	// prober, when set before start, is the agent's ProbeManager (instead of kubelet/prober).
	prober kubelet.ProbeManager
	// metrics, when set before start, receives the kubelet's metrics.
	metrics *metrics.Metrics

	mu    sync.Mutex
	kl    *kubelet.Kubelet // the in-process kubelet, while running
	ag    *fwagent.Agent
	child *exec.Cmd
}

// newNode starts the API server, containerd and (unless noStart) the agent, which registers the Node
// with InternalIP fwagent.NodeIP.
func newNode(t *testing.T, noStart bool) *node {
	t.Helper()
	return newNodeWith(t, noStart, containerd.Options{})
}

// newNodeWith is newNode with containerd options (e.g. another CNI network).
func newNodeWith(t *testing.T, noStart bool, opts containerd.Options) *node {
	t.Helper()
	n := &node{t: t, name: "kl-" + randSuffix()}
	n.cgroupRoot = fwagent.CgroupRoot(t, n.name) // removed last: after containerd removed every pod
	n.rt = containerd.Start(t, opts)
	n.api = apiserver.Start(t, apiserver.Options{})
	n.client = n.api.Client
	n.cfg = fwagent.Config(t, n.name, n.rt, n.api)
	n.cfg.Kubelet.CgroupRoot = n.cgroupRoot
	// The runtime's driver, which the agent checks against CRI RuntimeConfig or this containerd's
	// private config file (containerd 1.x).
	n.cfg.Kubelet.CgroupDriver = n.rt.Supervisor.Params().CgroupDriver
	n.cfg.ContainerdConfig = n.rt.Supervisor.ConfigPath()
	n.cfg.TuneKubelet = tuneKubelet
	n.rootDir, n.logDir = n.cfg.Paths().KubeletRoot, n.cfg.Kubelet.PodLogsDir
	t.Cleanup(n.stop)
	t.Cleanup(n.killChild)
	if !noStart {
		n.start()
	}
	return n
}

// tuneKubelet shortens the kubelet's housekeeping and GC periods.
func tuneKubelet(k *kubelet.Config) { k.HousekeepingPeriod, k.GCPeriod = time.Second, 5*time.Second }

// start runs a fresh agent in this process (a restart after stop or killChild).
func (n *node) start() {
	n.t.Helper()
	cfg := n.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{n.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.ProbeManager, cfg.Metrics = n.prober, n.metrics
	ag := fwagent.Start(n.t, cfg)
	n.mu.Lock()
	n.ag, n.kl = ag, ag.Kubelet()
	n.mu.Unlock()
}

// stop stops the in-process agent (pods keep running in containerd).
func (n *node) stop() {
	n.mu.Lock()
	ag := n.ag
	n.ag, n.kl = nil, nil
	n.mu.Unlock()
	if ag != nil {
		ag.Stop()
	}
}

// childEnv carries a child agent's Config as JSON (see TestMain).
const childEnv = "NODEKIT_KUBELET_E2E_CHILD"

// startChild runs the agent in a child process (this test binary, see TestMain), so that it can be
// killed with SIGKILL.
func (n *node) startChild() {
	n.t.Helper()
	spec, err := json.Marshal(n.cfg)
	if err != nil {
		n.t.Fatal(err)
	}
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

// killChild kills the child agent with SIGKILL (kill -9) and reaps it.
func (n *node) killChild() {
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

// runChild is the child process's main: the agent of the Config in the environment, until killed.
func runChild(spec string) {
	var cfg agent.Config
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		panic(err)
	}
	cfg.TuneKubelet = tuneKubelet
	if err := agent.Run(context.Background(), cfg); err != nil {
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
