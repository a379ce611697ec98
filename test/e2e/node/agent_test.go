package node_test

import (
	"bytes"
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images"
	apifw "github.com/nodekit/nodekit/test/framework/apiserver"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// nodekitBinary builds cmd/nodekit once per test binary, or returns $NODEKIT_BIN when set (a binary
// built beforehand, e.g. by `make build`).
func nodekitBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("NODEKIT_BIN"); b != "" {
		return b
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nk-node-e2e-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "nodekit")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/nodekit/nodekit/cmd/nodekit").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/nodekit: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
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

// syncBuffer is a bytes.Buffer safe for the agent's output goroutines.
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

// TestAgentBinary runs `nodekit agent` as a process against the bundled API server and a containerd
// endpoint: the node registers and goes Ready, a pod bound to it runs and its logs come back through
// the API server (pods/log → kubelet server), a static pod runs with a Running mirror pod, and SIGTERM
// stops the agent cleanly (exit 0) while the containers keep running.
func TestAgentBinary(t *testing.T) {
	bin := nodekitBinary(t)
	rt := ctrfw.Start(t, ctrfw.Options{})
	api := apifw.Start(t, apifw.Options{})
	admin := api.Client
	nodeName := randName("nk-agent-")
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	os.MkdirAll(manifests, 0o755)
	cfgFile := filepath.Join(dir, "kubelet.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nfileCheckFrequency: 1s\nstaticPodPath: %s\npodLogsDir: %s\n",
		manifests, filepath.Join(dir, "pods"))), 0o644)
	port := freePort(t)
	var out syncBuffer
	cmd := exec.Command(bin, "agent", "--data-dir", filepath.Join(dir, "data"), "--kubeconfig", api.NodeKubeconfig(t, nodeName),
		"--node-name", nodeName, "--node-ip", "127.0.0.1", "--address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--container-runtime-endpoint", rt.Endpoint(), "--config", cfgFile, "--cni-conf-dir", filepath.Join(dir, "net.d"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
		if t.Failed() {
			t.Logf("agent output:\n%s", out.String())
		}
	})
	ctx := context.Background()

	waitFor(t, 60*time.Second, "node Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r := readyCondition(n)
		return r != nil && r.Status == v1.ConditionTrue && n.Status.DaemonEndpoints.KubeletEndpoint.Port == int32(port), fmt.Sprintf("%+v", r)
	})

	// podCIDR assigned (the node IPAM controller's job, done here by the admin): the agent writes the
	// node's CNI conflist for it.
	if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType,
		[]byte(`{"spec":{"podCIDR":"10.244.9.0/24","podCIDRs":["10.244.9.0/24"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(dir, "net.d", "10-nodekit.conflist")
	waitFor(t, 20*time.Second, "CNI conflist for the podCIDR", func() (bool, string) {
		b, err := os.ReadFile(conflist)
		return err == nil && strings.Contains(string(b), "10.244.9.0/24"), fmt.Sprintf("%s %v", b, err)
	})

	// A pod bound to the node runs, and `kubectl logs` (pods/log through the API server) reaches the
	// kubelet server.
	ns := "default"
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: randName("web-")}, Spec: v1.PodSpec{NodeName: nodeName,
		Containers: []v1.Container{{Name: "web", Image: images.DemoServerV1, ImagePullPolicy: v1.PullNever}}}}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	waitFor(t, 60*time.Second, "pod Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	waitFor(t, 20*time.Second, "pod logs through the API server", func() (bool, string) {
		b, err := admin.CoreV1().Pods(ns).GetLogs(pod.Name, &v1.PodLogOptions{Container: "web"}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "demo-server v1 starting pod="), fmt.Sprintf("%q %v", b, err)
	})

	// A static pod runs and its mirror pod shows its status.
	os.WriteFile(filepath.Join(manifests, "static.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n"+
		"  - name: web\n    image: "+images.DemoServerV1+"\n    imagePullPolicy: Never\n"), 0o644)
	mirrorName := "static-web-" + nodeName
	t.Cleanup(func() { os.Remove(filepath.Join(manifests, "static.yaml")) })
	waitFor(t, 60*time.Second, "static pod's mirror Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Annotations["kubernetes.io/config.mirror"] != "" && p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s %v", p.Status.Phase, p.Annotations)
	})

	// SIGTERM: clean exit; containers keep running (the next agent adopts them).
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("agent exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not exit within 30 s of SIGTERM")
	}
	cs, err := rt.CRI.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(cs.GetContainers()) < 2 {
		t.Errorf("running containers after the agent stopped: %d, %v (want the pod's and the static pod's)", len(cs.GetContainers()), err)
	}
}
