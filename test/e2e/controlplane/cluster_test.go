// Package controlplane holds end-to-end tests of the bundled scheduler and controllers against the
// real API server on embedded etcd (test/framework/apiserver). No kubelet runs here: nodes are Node
// objects whose heartbeats (Lease renewals) and pod statuses are written by a small fake agent in the
// test, the way a kubelet would write them.
package controlplane

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/test/framework/apiserver"
)

// labTimings are the node lifecycle timings the tests run with (upstream: 40 s grace, 5 s period).
const (
	labGrace         = 3 * time.Second
	labMonitorPeriod = 300 * time.Millisecond
	labTolerationSec = 2
)

type cluster struct {
	*apiserver.Server
	t *testing.T
}

func testLogger() *slog.Logger {
	if os.Getenv("NODEKIT_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startCluster starts the API server and etcd, then the scheduler and every controller with lab
// timings, each under its own identity (system:kube-scheduler, system:kube-controller-manager) as the
// server process runs them, so every controller works with the bootstrap RBAC policy's roles; all stop
// at test cleanup.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	s := apiserver.Start(t, apiserver.Options{DefaultTolerationSeconds: labTolerationSec})
	cm := s.ControllerManagerClient(t)
	cmMeta := metadata.NewForConfigOrDie(s.ControllerManagerConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := scheduler.Run(ctx, s.SchedulerClient(t), scheduler.Options{Logger: testLogger(), RetryInterval: 5 * time.Second}); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		err := controllers.Run(ctx, cm, controllers.Options{
			Metadata:               cmMeta,
			Dynamic:                dynamic.NewForConfigOrDie(s.ControllerManagerConfig(t)),
			CRDs:                   apiextensionsclient.NewForConfigOrDie(s.ControllerManagerConfig(t)).CustomResourceDefinitions(),
			Logger:                 testLogger(),
			ClusterCIDR:            "10.244.0.0/16",
			NodeMonitorGracePeriod: labGrace,
			NodeMonitorPeriod:      labMonitorPeriod,
			RootCA:                 s.Config.CAData,
		})
		if err != nil {
			t.Errorf("controllers: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &cluster{Server: s, t: t}
}

// eventually polls cond every 50 ms until it returns nil or timeout passes, then fails with its
// last error.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fakeNode is a Node object plus the agent that a kubelet would be: it renews the Node's Lease,
// reports Ready, and for pods bound to it sets phase Running, a pod IP from the Node's podCIDR and the
// Ready condition (readiness decided by Ready, default true), and confirms graceful deletions.
type fakeNode struct {
	name   string
	client kubernetes.Interface
	t      *testing.T

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	nextIP  int
	Ready   func(*v1.Pod) bool
	podCIDR netip.Prefix
}

// addNode registers a Ready node with cpu/memory allocatable and starts its agent.
func (c *cluster) addNode(name, cpu, memory string) *fakeNode {
	t := c.t
	t.Helper()
	ctx := context.Background()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory),
				v1.ResourcePods: resource.MustParse("110")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory),
				v1.ResourcePods: resource.MustParse("110")},
		},
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	n := &fakeNode{name: name, client: c.Client, t: t, nextIP: 2}
	n.Start()
	t.Cleanup(n.Stop)
	// Usable once Ready (posted by the agent) and given a podCIDR (by node IPAM).
	eventually(t, 20*time.Second, "node "+name+" ready with a podCIDR", func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rc := readyCondition(node); rc == nil || rc.Status != v1.ConditionTrue || node.Spec.PodCIDR == "" {
			return errorf("ready=%+v podCIDR=%q", rc, node.Spec.PodCIDR)
		}
		return nil
	})
	return n
}

// Start runs the agent (heartbeats and pod status) until Stop.
func (n *fakeNode) Start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); n.heartbeat(ctx) }()
		go func() { defer wg.Done(); n.syncPods(ctx) }()
		wg.Wait()
	}()
}

// Stop halts the agent, like a kubelet that died: no more heartbeats, no pod updates.
func (n *fakeNode) Stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (n *fakeNode) heartbeat(ctx context.Context) {
	for {
		n.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// beat renews the Lease and posts Ready=True with a fresh heartbeat time.
func (n *fakeNode) beat(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, 5*time.Second) // a hung request must not stop the heartbeats
	defer cancel()
	now := metav1.NowMicro()
	leases := n.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		dur := int32(40)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: v1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &n.name, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		return // API server restarting: try again next beat
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if node.Spec.PodCIDR != "" {
		n.mu.Lock()
		n.podCIDR, _ = netip.ParsePrefix(node.Spec.PodCIDR)
		n.mu.Unlock()
	}
	ready := readyCondition(node)
	if ready != nil && ready.Status == v1.ConditionTrue && time.Since(ready.LastHeartbeatTime.Time) < 2*time.Second {
		return // status is fresh: the Lease carries the heartbeat, as with a real kubelet
	}
	ts := metav1.Now()
	cond := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "fake agent is posting ready status",
		LastHeartbeatTime: ts, LastTransitionTime: ts}
	if ready != nil && ready.Status == v1.ConditionTrue {
		cond.LastTransitionTime = ready.LastTransitionTime
	}
	var conds []v1.NodeCondition
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			conds = append(conds, c)
		}
	}
	node.Status.Conditions = append(conds, cond)
	_, _ = n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
}

func readyCondition(node *v1.Node) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == v1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// syncPods watches the pods bound to this node and plays the kubelet's part for them.
func (n *fakeNode) syncPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.name).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	queue := make(chan *v1.Pod, 1024)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { queue <- obj.(*v1.Pod) },
		UpdateFunc: func(_, obj any) { queue <- obj.(*v1.Pod) },
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	resync := time.NewTicker(time.Second)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-queue:
			n.syncPod(ctx, p)
		case <-resync.C:
			for _, o := range inf.GetStore().List() {
				n.syncPod(ctx, o.(*v1.Pod))
			}
		}
	}
}

func (n *fakeNode) syncPod(ctx context.Context, p *v1.Pod) {
	if p.DeletionTimestamp != nil {
		zero := int64(0)
		_ = n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
		return
	}
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return // finished: a kubelet never runs a terminal pod again
	}
	ready := n.Ready == nil || n.Ready(p)
	want := v1.ConditionFalse
	if ready {
		want = v1.ConditionTrue
	}
	cur := podCondition(p, v1.PodReady)
	if p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" && cur != nil && cur.Status == want {
		return
	}
	upd := p.DeepCopy()
	if upd.Status.PodIP == "" {
		n.mu.Lock()
		if !n.podCIDR.IsValid() {
			n.mu.Unlock()
			return // no podCIDR yet: like a kubelet whose CNI is not configured
		}
		ip := n.podCIDR.Addr()
		for range n.nextIP {
			ip = ip.Next()
		}
		n.nextIP++
		n.mu.Unlock()
		upd.Status.PodIP = ip.String()
		upd.Status.PodIPs = []v1.PodIP{{IP: ip.String()}}
	}
	now := metav1.Now()
	upd.Status.Phase = v1.PodRunning
	if upd.Status.StartTime == nil {
		upd.Status.StartTime = &now
	}
	setPodCondition(upd, v1.PodReady, want, now)
	setPodCondition(upd, v1.ContainersReady, want, now)
	_, _ = n.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
}

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func setPodCondition(p *v1.Pod, t v1.PodConditionType, s v1.ConditionStatus, now metav1.Time) {
	if c := podCondition(p, t); c != nil {
		if c.Status != s {
			c.Status, c.LastTransitionTime = s, now
		}
		return
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
}

func isReady(p *v1.Pod) bool {
	c := podCondition(p, v1.PodReady)
	return c != nil && c.Status == v1.ConditionTrue
}

// activePods lists the pods in ns matching selector that are not being deleted.
func (c *cluster) activePods(ns, selector string) ([]v1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// modify reads an object with get, applies change and writes it with update, retrying on conflict;
// any other error fails the test.
func modify[T any](t *testing.T, get func() (T, error), change func(T), update func(T) error) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get()
		if err != nil {
			return err
		}
		change(obj)
		return update(obj)
	}))
}
