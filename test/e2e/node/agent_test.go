package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	nkagent "github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/server"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	apifw "github.com/nodekit/nodekit/test/framework/apiserver"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// nodekitBinary builds cmd/nodekit and cmd/nodekit-cni once per test binary, or returns $NODEKIT_BIN
// when set (a binary built beforehand, e.g. by `make build`, with nodekit-cni beside it).
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
		// nodekit-cni goes next to nodekit, where the agent installs it from.
		out, err := exec.Command("go", "build", "-o", dir, "github.com/nodekit/nodekit/cmd/nodekit", "github.com/nodekit/nodekit/cmd/nodekit-cni").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/nodekit ./cmd/nodekit-cni: %v\n%s", err, out)
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

// agentProc is a running `nodekit agent`.
type agentProc struct {
	cmd  *exec.Cmd
	log  string        // its stdout and stderr
	done chan struct{} // closed when the process exited; err is then set
	err  error
}

// startAgent starts `nodekit agent args...`; cleanup stops it (SIGTERM, SIGKILL after 30 s) and prints
// its output when the test failed.
func startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{cmd: exec.Command(nodekitBinary(t), append([]string{"agent"}, args...)...), done: make(chan struct{}),
		log: filepath.Join(t.TempDir(), "agent.log")}
	f, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	a.cmd.Stdout, a.cmd.Stderr = f, f
	// A test binary killed (a timeout, Ctrl-C) takes its agent along instead of leaving it holding
	// ports and containers.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.err = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.stop(30 * time.Second) // its managed containerd, if any, gets SIGTERM through Pdeathsig
		if i := slices.Index(args, "--data-dir"); i >= 0 && i+1 < len(args) {
			fwagent.UnmountBelow(t, args[i+1]) // the pods' token volumes, before t.TempDir's removal
		}
		if t.Failed() {
			out, _ := os.ReadFile(a.log)
			t.Logf("agent output:\n%s", out)
		}
	})
	return a
}

// stop sends SIGTERM and waits up to timeout (then SIGKILL); it returns the exit error, or an error
// saying it had to be killed.
func (a *agentProc) stop(timeout time.Duration) error {
	select {
	case <-a.done:
		return a.err
	default:
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return a.err
	case <-time.After(timeout):
		a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("agent did not exit within %v of SIGTERM", timeout)
	}
}

// alive fails t when the agent has exited.
func (a *agentProc) alive(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
		t.Fatalf("agent exited: %v", a.err)
	default:
	}
}

// TestAgentBinary runs `nodekit agent` as a process against the bundled API server and a containerd
// endpoint: the node registers and goes Ready, a pod bound to it runs and its logs come back through
// the API server (pods/log → kubelet server), `kubectl exec` works (pods/exec → kubelet server → CRI
// streaming), and so do attach and port-forward over SPDY and WebSocket (testPodStreams), `kubectl debug`
// of a pod (ephemeral containers) and of the node (testDebug), the podCIDR yields the CNI conflist, a static pod runs with a Running mirror pod,
// containerd stopped for 20 s makes the node NotReady and Ready again with the pod untouched, and SIGTERM
// stops the agent cleanly (exit 0) while the containers keep running. Certificates: the node's client
// certificate, 45 s from its end, is renewed through a CSR the self-node-client rule approves, with the
// cluster's 15-minute --cluster-signing-duration, and the node still heartbeats after the old one
// expired; the serving certificate's SANs are the Node's addresses; the node's CSRs for another node's
// name are refused.
func TestAgentBinary(t *testing.T) {
	rt := ctrfw.Start(t, ctrfw.Options{})
	api := apifw.Start(t, apifw.Options{})
	admin := api.Client
	nodeName := randName("nk-agent-")
	// csrapproving and csrsigning, so the kubelet gets its serving certificate (serverTLSBootstrap) and
	// the API server, which verifies kubelets against the cluster CA, reaches it for logs and exec.
	ca, err := pki.LoadOrCreateCA(server.Config{DataDir: api.DataDir}.Paths().PKIDir)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		if err := controllers.Run(cctx, admin, controllers.Options{Controllers: []string{controllers.CSRApproving, controllers.CSRSigning, controllers.EndpointSlice},
			ClusterSigner: ca, ClusterSigningDuration: testSigningDuration}); err != nil && cctx.Err() == nil {
			t.Errorf("certificate controllers: %v", err)
		}
	}()
	t.Cleanup(func() { ccancel(); <-cdone })
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	os.MkdirAll(manifests, 0o755)
	cfgFile := filepath.Join(dir, "kubelet.yaml")
	// The harness's GC and eviction settings (test/framework/agent): the shared host disk's fill level
	// would otherwise evict the test's pods (imagefs.available<15 %).
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nfileCheckFrequency: 1s\nstaticPodPath: %s\npodLogsDir: %s\n"+
		"imageGCHighThresholdPercent: %d\nevictionHard:\n  memory.available: %s\n",
		manifests, filepath.Join(dir, "pods"), fwagent.NoImageGCPercent, fwagent.MemoryEvictionHard)), 0o644)
	port := freePort(t)
	// The node's client certificate is near its end: the agent renews it through a CSR at once. (The
	// binary is built first: the 45 s count from the agent's start.)
	nodekitBinary(t)
	kubeconfig, oldCert := expiringNodeKubeconfig(t, api, ca, nodeName, time.Now().Add(45*time.Second))
	agent := startAgent(t, "--data-dir", filepath.Join(dir, "data"), "--kubeconfig", kubeconfig,
		"--node-name", nodeName, "--node-ip", "127.0.0.1", "--address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--container-runtime-endpoint", rt.Endpoint(), "--config", cfgFile, "--cni-conf-dir", filepath.Join(dir, "net.d"),
		// no service proxy: it would program the host's own iptables (10.96.0.1 to this test's API server)
		// and leave the rules behind, as kube-proxy does on exit; the proxy is tested in namespaces of its own
		"--disable-proxy")
	ctx := context.Background()

	waitFor(t, 60*time.Second, "node Ready", func() (bool, string) {
		agent.alive(t)
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
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: randName("web-"), Labels: map[string]string{"app": "web"}}, Spec: v1.PodSpec{NodeName: nodeName,
		Containers: []v1.Container{{Name: "web", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullNever,
			Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}}}}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	waitFor(t, 60*time.Second, "pod Running and Ready (readiness probe wired)", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == v1.PodReady && c.Status == v1.ConditionTrue)
		}
		return p.Status.Phase == v1.PodRunning && ready, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.Conditions)
	})
	waitClientRotated(t, admin, filepath.Join(dir, "data", "kubelet", "pki"), nodeName, oldCert, ca)
	assertServingCert(t, admin, port, nodeName, ca)
	assertForgedCSRsRefused(t, api, nodeName)
	waitFor(t, 20*time.Second, "pod logs through the API server", func() (bool, string) {
		b, err := admin.CoreV1().Pods(ns).GetLogs(pod.Name, &v1.PodLogOptions{Container: "web"}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "demo-server v1 starting pod="), fmt.Sprintf("%q %v", b, err)
	})

	// `kubectl exec`: pods/exec through the API server to the kubelet server, then the CRI streaming server.
	req := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod.Name).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "web", Command: []string{"hostname"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(api.Config, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	defer ecancel()
	if err := ex.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil || stdout.String() != pod.Name+"\n" {
		t.Errorf("exec hostname through the API server: %q (stderr %q), %v", stdout.String(), stderr.String(), err)
	}
	// `kubectl attach` and `kubectl port-forward`, and the WebSocket protocols kubectl 1.30+ tries first.
	web := pod.DeepCopy()
	web.Namespace = ns
	t.Run("Streams", func(t *testing.T) { testPodStreams(t, api.Config, api.KubeconfigPath, nodeName, web) })
	// pods/proxy, services/proxy and nodes/proxy through the API server to the pod and the kubelet.
	t.Run("Proxy", func(t *testing.T) { testProxy(t, api.Config, api.KubeconfigPath, nodeName, port, web) })
	t.Run("Debug", func(t *testing.T) { testDebug(t, admin, api.KubeconfigPath, nodeName, web) })

	// A static pod runs and its mirror pod shows its status.
	os.WriteFile(filepath.Join(manifests, "static.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n"+
		"  - name: web\n    image: "+bundled.DemoServerV1+"\n    imagePullPolicy: Never\n"), 0o644)
	mirrorName := "static-web-" + nodeName
	t.Cleanup(func() { os.Remove(filepath.Join(manifests, "static.yaml")) })
	waitFor(t, 60*time.Second, "static pod's mirror Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Annotations["kubernetes.io/config.mirror"] != "" && p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s %v", p.Status.Phase, p.Annotations)
	})

	// containerd down for 20 s under the running agent: the node goes NotReady with the runtime's reason
	// and comes back; the kubelet's pod keeps running with no restart and the same container.
	before, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	containerdOutage(t, rt, 20*time.Second, func(time.Time) {
		waitNodeReady(t, admin, nodeName, v1.ConditionFalse, "container runtime is down: runtime not reachable at "+rt.Endpoint(), 15*time.Second)
	})
	waitNodeReady(t, admin, nodeName, v1.ConditionTrue, "", 45*time.Second)
	waitFor(t, 20*time.Second, "pod unchanged after the outage", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cs, was := p.Status.ContainerStatuses, before.Status.ContainerStatuses
		ok := p.Status.Phase == v1.PodRunning && len(cs) == 1 && len(was) == 1 && cs[0].RestartCount == 0 &&
			cs[0].ContainerID == was[0].ContainerID && cs[0].Ready && cs[0].State.Running != nil
		return ok, fmt.Sprintf("%s %+v", p.Status.Phase, cs)
	})

	// Past the old client certificate's end, the node still heartbeats: with the renewed one.
	waitHeartbeatAfter(t, admin, nodeName, oldCert.NotAfter)

	// SIGTERM: clean exit; containers keep running (the next agent adopts them).
	if err := agent.stop(30 * time.Second); err != nil {
		t.Errorf("agent after SIGTERM: %v", err)
	}
	cs, err := rt.CRI.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(cs.GetContainers()) < 2 {
		t.Errorf("running containers after the agent stopped: %d, %v (want the pod's and the static pod's)", len(cs.GetContainers()), err)
	}
}

// TestAgentManagedContainerd runs `nodekit agent` without --container-runtime-endpoint: it starts its own
// containerd and imports the bundled images from --images-dir. The node registers NotReady with the
// runtime's NetworkReady=false reason until it has a podCIDR, then the agent writes the CNI conflist and
// the node turns Ready, reporting the imported images; SIGTERM stops the agent and its containerd.
func TestAgentManagedContainerd(t *testing.T) {
	imagesDir := ctrfw.ImagesDir(t)
	api := apifw.Start(t, apifw.Options{})
	admin := api.Client
	nodeName := randName("nk-managed-")
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "d")
	agent := startAgent(t, "--data-dir", dataDir, "--kubeconfig", api.NodeKubeconfig(t, nodeName),
		"--node-name", nodeName, "--node-ip", "127.0.0.1", "--address", "127.0.0.1", "--port", strconv.Itoa(freePort(t)),
		"--images-dir", imagesDir, "--cni-conf-dir", filepath.Join(dir, "net.d"), "--node-status-update-frequency", "1s",
		"--disable-proxy") // as TestAgentBinary: no rules in the host's iptables
	ctx := context.Background()
	ready := func(n *v1.Node) *v1.NodeCondition {
		if r := readyCondition(n); r != nil {
			return r
		}
		return &v1.NodeCondition{}
	}
	waitFor(t, 90*time.Second, "node NotReady for the network", func() (bool, string) {
		agent.alive(t)
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r := ready(n)
		return r.Status == v1.ConditionFalse && strings.Contains(r.Message, "container runtime network not ready: NetworkReady=false"), fmt.Sprintf("%+v", r)
	})
	if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType,
		[]byte(`{"spec":{"podCIDR":"10.244.10.0/24","podCIDRs":["10.244.10.0/24"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var node *v1.Node
	waitFor(t, 60*time.Second, "node Ready with the conflist in place", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		return ready(n).Status == v1.ConditionTrue, fmt.Sprintf("%+v", ready(n))
	})
	if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("containerRuntimeVersion = %q", node.Status.NodeInfo.ContainerRuntimeVersion)
	}
	names := map[string]bool{}
	for _, img := range node.Status.Images {
		for _, n := range img.Names {
			names[n] = true
		}
	}
	for _, want := range bundled.All {
		if !names[want] {
			t.Errorf("status.images lacks imported %s: %v", want, node.Status.Images)
		}
	}

	sock := nkagent.Config{DataDir: dataDir}.Paths().ContainerdSocket
	if _, err := os.Stat(sock); err != nil {
		t.Errorf("managed containerd socket: %v", err)
	}
	if err := agent.stop(40 * time.Second); err != nil {
		t.Errorf("agent after SIGTERM: %v", err)
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		t.Error("managed containerd still answers after the agent stopped")
	}
}
