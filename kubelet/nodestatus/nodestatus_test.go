package nodestatus

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/version"
)

// fakeRuntime answers CRI Version and Status; down makes Status fail like an unreachable socket.
type fakeRuntime struct {
	mu         sync.Mutex
	down       error
	networkMsg string // non-empty: NetworkReady=false with this message
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest, ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v9.9.9", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, f.down
	}
	net := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if f.networkMsg != "" {
		net = &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: f.networkMsg}
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, net,
	}}}, nil
}

func (f *fakeRuntime) set(down error, networkMsg string) {
	f.mu.Lock()
	f.down, f.networkMsg = down, networkMsg
	f.mu.Unlock()
}

var testMachine = &Machine{NumCPU: 4, MemoryBytes: 8 << 30, EphemeralStorageBytes: 100 << 30, KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)", MachineID: "mid", BootID: "bid"}

func newTest(t *testing.T, client *fake.Clientset, rt *fakeRuntime) *Controller {
	t.Helper()
	c, err := New(Config{
		NodeName: "n1", Client: client, Runtime: rt, NodeIP: net.ParseIP("10.1.2.3"), Machine: testMachine,
		Labels: map[string]string{"zone": "a"}, Taints: []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}},
		KubeletPort: 10250, UpdateFrequency: 50 * time.Millisecond, LeaseDurationSeconds: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ready(t *testing.T, client *fake.Clientset) *v1.NodeCondition {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return readyOf(n)
}

func TestRegisterAndStatus(t *testing.T) {
	client := fake.NewClientset()
	rt := &fakeRuntime{}
	c := newTest(t, client, rt)
	ctx := context.Background()
	if err := c.register(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"zone": "a", v1.LabelHostname: "n1", v1.LabelOSStable: runtime.GOOS, v1.LabelArchStable: runtime.GOARCH} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "k" {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	if got := n.Status.Capacity; got.Cpu().Value() != 4 || got.Memory().Value() != 8<<30 || got.Pods().Value() != 110 || got.StorageEphemeral().Value() != 100<<30 {
		t.Errorf("capacity = %v", got)
	}
	if got := n.Status.Allocatable; got.Memory().Value() != 8<<30-100<<20 || got.StorageEphemeral().Value() != 90<<30 {
		t.Errorf("allocatable = %v", got)
	}
	if a := n.Status.Addresses; len(a) != 2 || a[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.1.2.3"}) || a[1] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"}) {
		t.Errorf("addresses = %v", a)
	}
	if ni := n.Status.NodeInfo; ni.ContainerRuntimeVersion != "containerd://v9.9.9" || ni.KernelVersion != "6.1.0" || ni.OSImage != testMachine.OSImage || ni.KubeletVersion != version.Version {
		t.Errorf("nodeInfo = %+v", ni)
	}
	if r := readyOf(n); r == nil || r.Status != v1.ConditionTrue || r.Reason != "KubeletReady" {
		t.Errorf("Ready = %+v", r)
	}
	if len(n.Status.Conditions) != 4 {
		t.Errorf("conditions = %v", n.Status.Conditions)
	}

	// Runtime down: NotReady with the runtime's error; transition time moves, heartbeats too.
	before := readyOf(n).LastTransitionTime
	time.Sleep(1100 * time.Millisecond) // metav1.Time has second resolution
	rt.set(errors.New("runtime not reachable at unix:///x.sock: connection refused"), "")
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	r := ready(t, client)
	if r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" || r.Message != "container runtime is down: runtime not reachable at unix:///x.sock: connection refused" {
		t.Errorf("Ready while runtime down = %+v", r)
	}
	if !r.LastTransitionTime.After(before.Time) {
		t.Errorf("lastTransitionTime did not move: %v -> %v", before, r.LastTransitionTime)
	}
	// Network not ready: the runtime's reason and message are carried.
	rt.set(nil, "cni plugin not initialized")
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ready(t, client); r.Status != v1.ConditionFalse || !strings.Contains(r.Message, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized") {
		t.Errorf("Ready with network down = %+v", r)
	}
	rt.set(nil, "")
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ready(t, client); r.Status != v1.ConditionTrue {
		t.Errorf("Ready after recovery = %+v", r)
	}
}

func TestUnchangedStatusIsNotPosted(t *testing.T) {
	client := fake.NewClientset()
	c := newTest(t, client, &fakeRuntime{})
	ctx := context.Background()
	if err := c.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStatus(ctx); err != nil { // first report
		t.Fatal(err)
	}
	client.ClearActions()
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("unchanged status within the report period was patched: %v", a)
		}
	}
	c.cfg.ReportFrequency = time.Nanosecond
	client.ClearActions()
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	patched := false
	for _, a := range client.Actions() {
		patched = patched || (a.GetVerb() == "patch" && a.GetSubresource() == "status")
	}
	if !patched {
		t.Error("status not posted after the report period")
	}
}

func TestExistingNodeReconcileAndPodCIDR(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", Labels: map[string]string{v1.LabelHostname: "old", "keep": "me"}},
		Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}}
	client := fake.NewClientset(existing)
	var got []string
	c := newTest(t, client, &fakeRuntime{})
	c.cfg.OnPodCIDRs = func(cidrs []string) { got = cidrs }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	<-c.Registered()
	// The lease is created with an owner reference to the node and renewed.
	var renew1 time.Time
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil {
			if renew1.IsZero() {
				renew1 = l.Spec.RenewTime.Time
				if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 1 || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "u1" || l.OwnerReferences[0].Kind != "Node" {
					t.Errorf("lease = %+v", l)
				}
			} else if l.Spec.RenewTime.After(renew1) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	l, _ := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
	if l == nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(renew1) {
		t.Errorf("lease not renewed: first %v, now %+v", renew1, l)
	}
	cancel()
	<-done
	n, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if n.Labels[v1.LabelHostname] != "n1" || n.Labels["keep"] != "me" {
		t.Errorf("labels after reconcile = %v", n.Labels)
	}
	if _, ok := n.Labels["zone"]; ok {
		t.Errorf("--node-labels applied to an existing node (upstream does not): %v", n.Labels)
	}
	if len(got) != 1 || got[0] != "10.244.1.0/24" || c.PodCIDRs()[0] != "10.244.1.0/24" {
		t.Errorf("podCIDRs callback got %v, PodCIDRs() = %v", got, c.PodCIDRs())
	}
}

func TestReadMachine(t *testing.T) {
	m, err := ReadMachine(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.NumCPU < 1 || m.MemoryBytes < 1<<20 || m.EphemeralStorageBytes < 1<<20 || m.KernelVersion == "" {
		t.Errorf("machine = %+v", m)
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil && strings.Contains(string(b), "PRETTY_NAME") && (m.OSImage == "" || m.OSImage == "Linux" || strings.Contains(m.OSImage, `"`)) {
		t.Errorf("OSImage = %q", m.OSImage)
	}
	p := filepath.Join(t.TempDir(), "os-release")
	os.WriteFile(p, []byte("NAME=x\nPRETTY_NAME=\"Foo OS 1\"\n"), 0o644)
	if got := osImage(p); got != "Foo OS 1" {
		t.Errorf("osImage = %q", got)
	}
}

// TestNetworkStatusCheck: with the runtime reporting NetworkReady=true, a failing Config.NetworkStatus
// makes the node NotReady with the runtime's wording and the plugin's error, and Ready again once it
// passes.
func TestNetworkStatusCheck(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	plugin := errors.New(`cni: network nodekit: plugin nodekit-cni: failed to find plugin "nodekit-cni" in path [/opt/cni/bin]`)
	c, err := New(Config{
		NodeName: "n1", Client: client, Runtime: &fakeRuntime{}, NodeIP: net.ParseIP("10.1.2.3"), Machine: testMachine,
		UpdateFrequency: 50 * time.Millisecond, LeaseDurationSeconds: 1,
		NetworkStatus: func(context.Context) error { mu.Lock(); defer mu.Unlock(); return plugin },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.register(ctx); err != nil {
		t.Fatal(err)
	}
	want := `container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: ` + plugin.Error()
	if r := ready(t, client); r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" || r.Message != want {
		t.Errorf("Ready with the plugin missing = %+v, want message %q", r, want)
	}
	mu.Lock()
	plugin = nil
	mu.Unlock()
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ready(t, client); r.Status != v1.ConditionTrue {
		t.Errorf("Ready once the plugin answers = %+v", r)
	}
}

// TestExtendedResourcesKept: an extended resource another party patched into the Node's status (an
// operator, or the e2e framework's AddExtendedResource) stays in capacity and allocatable across the
// kubelet's status updates, as upstream's MachineInfo setter keeps it; once removed from the capacity
// it leaves allocatable too. The kubelet's own resources are still recomputed.
func TestExtendedResourcesKept(t *testing.T) {
	client := fake.NewClientset()
	c := newTest(t, client, &fakeRuntime{})
	c.cfg.ReportFrequency = time.Nanosecond
	ctx := context.Background()
	if err := c.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	const foo = v1.ResourceName("scheduling.k8s.io/foo")
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Capacity[foo] = resource.MustParse("5")
	n.Status.Allocatable[foo] = resource.MustParse("5")
	n.Status.Capacity[v1.ResourceCPU] = resource.MustParse("99") // the kubelet's own: overwritten
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if q := n.Status.Capacity[foo]; q.Value() != 5 {
		t.Errorf("capacity[%s] = %v after a status update, want 5 (all: %v)", foo, q.String(), n.Status.Capacity)
	}
	if q := n.Status.Allocatable[foo]; q.Value() != 5 {
		t.Errorf("allocatable[%s] = %v after a status update, want 5", foo, q.String())
	}
	if q := n.Status.Capacity[v1.ResourceCPU]; q.Value() != int64(testMachine.NumCPU) {
		t.Errorf("capacity cpu = %v, want the machine's %d", q.String(), testMachine.NumCPU)
	}
	if mc, ma := n.Status.Capacity[v1.ResourceMemory], n.Status.Allocatable[v1.ResourceMemory]; mc.Cmp(ma) <= 0 {
		t.Errorf("allocatable memory %v is not below capacity %v (eviction reserve)", ma.String(), mc.String())
	}
	delete(n.Status.Capacity, foo)
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := n.Status.Allocatable[foo]; ok {
		t.Errorf("allocatable keeps %s after it left the capacity: %v", foo, n.Status.Allocatable)
	}
}
