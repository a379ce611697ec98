package kubelet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images"
	"github.com/nodekit/nodekit/kubelet"
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
// root, so that parallel test binaries never share anything.
type node struct {
	t          *testing.T
	rt         *containerd.Runtime
	client     kubernetes.Interface
	name       string
	rootDir    string
	logDir     string
	cgroupRoot string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	kl     *kubelet.Kubelet
}

// newNode starts containerd and (unless noStart) the kubelet. The API is client-go's fake clientset:
// the bundled apiserver test framework is not available to this package yet.
func newNode(t *testing.T, noStart bool) *node {
	t.Helper()
	sfx := randSuffix()
	n := &node{t: t, name: "kl-" + sfx, cgroupRoot: "/nodekit-kl-" + sfx}
	// Registered first, so it runs last: after containerd removed every pod.
	t.Cleanup(func() { removeCgroupTree(t, n.cgroupRoot) })
	n.rt = containerd.Start(t, containerd.Options{})
	dir := t.TempDir()
	n.rootDir, n.logDir = filepath.Join(dir, "kubelet"), filepath.Join(dir, "pods-logs")
	n.client = fake.NewSimpleClientset(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}}},
	})
	t.Cleanup(n.stop)
	if !noStart {
		n.start()
	}
	return n
}

// start runs a fresh Kubelet (a restart after stop).
func (n *node) start() {
	n.t.Helper()
	kl, err := kubelet.New(kubelet.Config{
		NodeName: n.name, Runtime: n.rt.CRI.Runtime(), Images: n.rt.CRI.Image(), Client: n.client,
		RootDir: n.rootDir, PodLogsDir: n.logDir, CgroupRoot: n.cgroupRoot,
		HousekeepingPeriod: time.Second, GCPeriod: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{n.t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
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

// stop stops the kubelet (pods keep running in containerd).
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
				Name: "demo", Image: images.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent, Args: args,
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

// deleteGracefully does what the API server does for a graceful delete: it sets deletionTimestamp and
// deletionGracePeriodSeconds; the kubelet finishes the deletion after stopping the containers.
func (n *node) deleteGracefully(name string, grace int64) {
	n.t.Helper()
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
