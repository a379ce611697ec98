package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/kubelet/nodestatus"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/runtime/cri"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	apifw "github.com/nodekit/nodekit/test/framework/apiserver"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
	"github.com/nodekit/nodekit/version"
)

func randName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// waitFor polls cond every 200 ms until it returns true or timeout passes; it fails t with the last
// description cond gave.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, last)
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// TestNodeLifecycle runs the node agent (agent.Run) against the bundled API server with a real
// containerd and checks: the Node's capacity, labels, taints, addresses and nodeInfo (runtime version
// from CRI); the KubeletConfiguration file with a flag overriding it; the Lease being renewed; Ready;
// the conflist written from the podCIDR; a mirror pod for a static pod; RuntimeClasses (a pod under
// the "runc" handler runs with that CRI runtime handler, one under a handler containerd lacks stays
// Pending with a FailedCreatePodSandBox event naming it); then containerd stopped for
// 20 s: NotReady with the runtime's reason, the Lease still renewed, and back to Ready with the pod's
// container still running.
func TestNodeLifecycle(t *testing.T) {
	nodeName := randName("nk-e2e-")
	cgroupRoot := fwagent.CgroupRoot(t, nodeName) // removed last, after containerd removed the pods
	rt := ctrfw.Start(t, ctrfw.Options{})
	api := apifw.Start(t, apifw.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The test's own CRI connection, which outlives containerd restarts.
	crc, err := cri.Dial(ctx, rt.Endpoint(), cri.WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crc.Close() })
	ver, err := crc.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// KubeletConfiguration file + explicit flags, through the agent's command line: --max-pods
	// overrides the file, the rest comes from it.
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	os.MkdirAll(manifests, 0o755)
	cfgFile := filepath.Join(dir, "kubelet.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 50
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 4
fileCheckFrequency: 1s
staticPodPath: %s
registerWithTaints:
- {key: nodekit.io/e2e, value: "yes", effect: PreferNoSchedule}
`, manifests)), 0o644)
	base := fwagent.Config(t, nodeName, rt, api)
	base.Kubelet.CgroupRoot = cgroupRoot
	cfg := agent.Default()
	fs := pflag.NewFlagSet(agent.Command, pflag.ContinueOnError)
	flags := agent.BindFlags(fs, &cfg)
	if err := fs.Parse(append(base.Args()[1:], "--config", cfgFile, "--max-pods", "60", "--node-labels", "nodekit.io/pool=e2e")); err != nil {
		t.Fatal(err)
	}
	if cfg, err = flags.Config(); err != nil {
		t.Fatal(err)
	}
	admin := api.Client
	t.Cleanup(func() { admin.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{}) })
	fwagent.Start(t, cfg)
	machine, err := nodestatus.ReadMachine(cfg.Paths().KubeletRoot)
	if err != nil {
		t.Fatal(err)
	}

	// Registration.
	var node *v1.Node
	waitFor(t, 30*time.Second, "node Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		r := readyCondition(n)
		return r != nil && r.Status == v1.ConditionTrue, fmt.Sprintf("%+v", r)
	})
	capacity := node.Status.Capacity
	if capacity.Cpu().Value() != int64(runtime.NumCPU()) || capacity.Memory().Value() != machine.MemoryBytes ||
		capacity.Pods().Value() != 60 || capacity.StorageEphemeral().Value() != machine.EphemeralStorageBytes || capacity.StorageEphemeral().Value() == 0 {
		t.Errorf("capacity = %v (want pods=60 from the --max-pods flag over the file's 50)", capacity)
	}
	if a := node.Status.Allocatable; a.Memory().Cmp(*capacity.Memory()) >= 0 || a.Pods().Value() != 60 {
		t.Errorf("allocatable = %v", a)
	}
	for k, v := range map[string]string{v1.LabelHostname: nodeName, v1.LabelOSStable: "linux", v1.LabelArchStable: runtime.GOARCH, "nodekit.io/pool": "e2e"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "nodekit.io/e2e" || node.Spec.Taints[0].Effect != v1.TaintEffectPreferNoSchedule {
		t.Errorf("taints = %v (from the config file's registerWithTaints)", node.Spec.Taints)
	}
	wantAddr := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fwagent.NodeIP}, {Type: v1.NodeHostName, Address: nodeName}}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(wantAddr) {
		t.Errorf("addresses = %v, want %v", node.Status.Addresses, wantAddr)
	}
	ni := node.Status.NodeInfo
	if ni.ContainerRuntimeVersion != "containerd://"+ver.RuntimeVersion || ni.KubeletVersion != version.Version ||
		ni.KernelVersion != machine.KernelVersion || ni.OSImage != machine.OSImage || ni.OSImage == "" || ni.BootID == "" ||
		ni.OperatingSystem != "linux" || ni.Architecture != runtime.GOARCH {
		t.Errorf("nodeInfo = %+v (runtime %s %s)", ni, ver.RuntimeName, ver.RuntimeVersion)
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != cfg.Kubelet.Port {
		t.Errorf("kubelet port = %d, want %d (--port)", node.Status.DaemonEndpoints.KubeletEndpoint.Port, cfg.Kubelet.Port)
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		found := false
		for _, c := range node.Status.Conditions {
			found = found || (c.Type == ct && c.Status == v1.ConditionFalse && !c.LastHeartbeatTime.IsZero())
		}
		if !found {
			t.Errorf("condition %s=False missing: %v", ct, node.Status.Conditions)
		}
	}

	// The Lease (created by its own controller, maybe just after Ready): owned by the Node, duration
	// from the config file, renewed every duration/4 (1 s).
	var lease *coordinationv1.Lease
	waitFor(t, 10*time.Second, "the node's Lease", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		lease = l
		return err == nil, fmt.Sprint(err)
	})
	if *lease.Spec.HolderIdentity != nodeName || *lease.Spec.LeaseDurationSeconds != 4 || len(lease.OwnerReferences) != 1 ||
		lease.OwnerReferences[0].UID != node.UID || lease.OwnerReferences[0].Kind != "Node" {
		t.Errorf("lease = %+v", lease)
	}
	leaseRenewedAfter := func(after time.Time) func() (bool, string) {
		return func() (bool, string) {
			l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime.Time.After(after), l.Spec.RenewTime.String()
		}
	}
	waitFor(t, 10*time.Second, "lease renewal", leaseRenewedAfter(lease.Spec.RenewTime.Time))

	// podCIDR set by the node IPAM controller's role (here the admin) is read back into the conflist.
	if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType,
		[]byte(`{"spec":{"podCIDR":"10.244.7.0/24","podCIDRs":["10.244.7.0/24"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the conflist with the podCIDR", func() (bool, string) {
		b, err := os.ReadFile(cfg.Paths().Conflist)
		return err == nil && strings.Contains(string(b), `"10.244.7.0/24"`), fmt.Sprintf("%s: %v", b, err)
	})

	// A static pod gets a mirror pod in the API, created with the node's own credentials.
	os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n  - name: web\n    image: nodekit.local/demo-server:v1\n"), 0o644)
	var mirror *v1.Pod
	waitFor(t, 15*time.Second, "mirror pod", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "static-web-"+nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		mirror = p
		return true, ""
	})
	if mirror.Annotations[static.ConfigMirrorAnnotation] == "" || mirror.Annotations[static.ConfigMirrorAnnotation] != mirror.Annotations[static.ConfigHashAnnotation] ||
		mirror.Annotations[static.ConfigSourceAnnotation] != "file" || mirror.Spec.NodeName != nodeName ||
		len(mirror.OwnerReferences) != 1 || mirror.OwnerReferences[0].UID != node.UID {
		t.Errorf("mirror pod = %+v", mirror.ObjectMeta)
	}
	os.Remove(filepath.Join(manifests, "web.yaml"))
	waitFor(t, 15*time.Second, "mirror pod deletion", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "static-web-"+nodeName, metav1.GetOptions{})
		if err == nil {
			return false, fmt.Sprintf("still there: deletionTimestamp=%v finalizers=%v", p.DeletionTimestamp, p.Finalizers)
		}
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// containerd down for 20 s: NotReady with the runtime's reason, heartbeats continue, then Ready again
	// with the pod's container still running.
	pod := runPod(t, admin, nodeName, "survivor", runtimeClassPods(t, ctx, admin, nodeName))
	sbs, err := crc.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]string{}
	for _, sb := range sbs.Items {
		handlers[sb.Metadata.Name] = sb.RuntimeHandler
	}
	if h, ok := handlers["survivor"]; !ok || h != "runc" {
		t.Errorf("sandbox of the pod under the runc RuntimeClass: runtime handler %q (found %v), want runc", h, ok)
	}
	endpoint := rt.Endpoint()
	restarted := containerdOutage(t, rt, 20*time.Second, func(stopped time.Time) {
		waitNodeReady(t, admin, nodeName, v1.ConditionFalse, "container runtime is down: runtime not reachable at "+endpoint, 10*time.Second)
		t.Logf("NotReady %v after containerd stopped", time.Since(stopped).Round(100*time.Millisecond))
		waitFor(t, 10*time.Second, "lease renewal while the runtime is down", leaseRenewedAfter(time.Now()))
	})
	waitNodeReady(t, admin, nodeName, v1.ConditionTrue, "", 30*time.Second)
	t.Logf("Ready %v after containerd restarted", time.Since(restarted).Round(100*time.Millisecond))
	st, err := crc.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: pod.containerID})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("pod container after the outage: %v, %v", st.GetStatus().GetState(), err)
	}
	if _, err := ctrfw.WaitHTTP("http://"+pod.ip+":8080/healthz", 10*time.Second); err != nil {
		t.Errorf("pod not serving after the outage: %v", err)
	}
}

// runningPod is a pod's IP and its one container's CRI ID.
type runningPod struct{ ip, containerID string }

// runtimeClassPods creates RuntimeClasses with containerd's "runc" handler and with a handler containerd
// does not have; a pod naming the second stays Pending with a FailedCreatePodSandBox event naming the
// handler. It returns the first class's name, for a pod that must run (its sandbox's handler is runc).
func runtimeClassPods(t *testing.T, ctx context.Context, admin kubernetes.Interface, node string) string {
	t.Helper()
	bogusHandler := randName("nk-missing-")
	for name, handler := range map[string]string{node + "-runc": "runc", node + "-bogus": bogusHandler} {
		if _, err := admin.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	bogus := node + "-bogus"
	grace := int64(0)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bogus-handler", Namespace: "default"}, Spec: v1.PodSpec{NodeName: node,
		RuntimeClassName: &bogus, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "FailedCreatePodSandBox naming the unknown handler", func() (bool, string) {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bogus-handler,reason=FailedCreatePodSandBox"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, bogusHandler) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	if got, err := admin.CoreV1().Pods("default").Get(ctx, "bogus-handler", metav1.GetOptions{}); err != nil || got.Status.Phase != v1.PodPending {
		t.Errorf("pod with an unknown runtime handler: %v, want Pending (%v)", got.Status.Phase, err)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, "bogus-handler", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	return node + "-runc"
}

// runPod creates a demo-server pod bound to node (under RuntimeClass runtimeClass, "" for none) and waits
// until its container runs.
func runPod(t *testing.T, admin kubernetes.Interface, node, name, runtimeClass string) runningPod {
	t.Helper()
	grace := int64(1)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{NodeName: node,
		TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1}}}}
	if runtimeClass != "" {
		pod.Spec.RuntimeClassName = &runtimeClass
	}
	if _, err := admin.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var rp runningPod
	waitFor(t, 60*time.Second, "pod "+name+" running", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil || p.Status.PodIP == "" {
			return false, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
		rp = runningPod{ip: p.Status.PodIP, containerID: id}
		return true, ""
	})
	return rp
}
