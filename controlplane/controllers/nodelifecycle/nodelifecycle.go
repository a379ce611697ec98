// Package nodelifecycle is the node lifecycle controller: it watches each Node's heartbeats (its Lease
// in kube-node-lease and its Ready condition's lastHeartbeatTime) and, when none arrived for the grace
// period (40 s by default), sets the Node's conditions to Unknown ("Kubelet stopped posting node
// status."), marks its pods not Ready and taints it node.kubernetes.io/unreachable (NoExecute and
// NoSchedule); a Node reporting Ready=False gets node.kubernetes.io/not-ready likewise. The taints are
// lifted when the kubelet reports Ready=True again. Pods on a NoExecute-tainted Node are evicted
// (deleted) at once when they do not tolerate a taint, or after the shortest tolerationSeconds of the
// tolerations that match (upstream's taint-based eviction; the API server's DefaultTolerationSeconds
// admission gives ordinary pods 300 s). Pods bound to a Node that was deleted are force-deleted.
package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/internal/podspec"
)

// LeaseNamespace holds the kubelets' heartbeat Leases, one per Node, named after it.
const LeaseNamespace = v1.NamespaceNodeLease

const nodeNameIndex = "spec.nodeName"

// Options are the controller's timings; zero values take upstream's defaults.
type Options struct {
	// GracePeriod is how long a Node may go without a heartbeat before it is Unknown (default 40 s,
	// kube-controller-manager --node-monitor-grace-period).
	GracePeriod time.Duration
	// MonitorPeriod is how often Nodes and evictions are checked (default 5 s, --node-monitor-period).
	MonitorPeriod time.Duration
}

type health struct {
	probe     time.Time // local time the last heartbeat was seen
	leaseTime time.Time
	heartbeat time.Time
}

// Defaults of Options (kube-controller-manager's --node-monitor-grace-period and --node-monitor-period).
const (
	DefaultGracePeriod   = 40 * time.Second
	DefaultMonitorPeriod = 5 * time.Second
)

// Controller monitors node health and performs taint-based eviction.
type Controller struct {
	client kubernetes.Interface
	opts   Options
	log    *slog.Logger
	logr   logr.Logger
	nodes  corelisters.NodeLister
	leases coordinationlisters.LeaseLister
	pods   cache.Indexer
	synced []cache.InformerSynced
	health map[string]*health
}

// New registers the controller's informers (Nodes, Leases, Pods indexed by node) on factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options, log *slog.Logger) (*Controller, error) {
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.MonitorPeriod <= 0 {
		opts.MonitorPeriod = DefaultMonitorPeriod
	}
	if log == nil {
		log = slog.Default()
	}
	podInf := factory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: pod index: %w", err)
	}
	nodeInf := factory.Core().V1().Nodes().Informer()
	leaseInf := factory.Coordination().V1().Leases().Informer()
	l := log.With("controller", "nodelifecycle")
	return &Controller{
		client: client, opts: opts, log: l, logr: logr.FromSlogHandler(l.Handler()),
		nodes:  factory.Core().V1().Nodes().Lister(),
		leases: factory.Coordination().V1().Leases().Lister(),
		pods:   podInf.GetIndexer(),
		synced: []cache.InformerSynced{podInf.HasSynced, nodeInf.HasSynced, leaseInf.HasSynced},
		health: map[string]*health{},
	}, nil
}

// Run checks every Node each MonitorPeriod until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.log.Info("controller started", "gracePeriod", c.opts.GracePeriod, "monitorPeriod", c.opts.MonitorPeriod)
	t := time.NewTicker(c.opts.MonitorPeriod)
	defer t.Stop()
	for {
		c.monitor(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// monitor runs one pass: health of every Node, then evictions on tainted Nodes.
func (c *Controller) monitor(ctx context.Context, now time.Time) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Name] = true
		if err := c.monitorNode(ctx, n, now); err != nil {
			c.log.Warn("node health update failed", "node", n.Name, "err", err)
		}
		if err := c.evictPods(ctx, n.Name, now); err != nil {
			c.log.Warn("eviction failed", "node", n.Name, "err", err)
		}
	}
	for name := range c.health {
		if !seen[name] {
			delete(c.health, name)
		}
	}
	c.collectOrphanedPods(ctx, seen)
}

// collectOrphanedPods force-deletes pods bound to Nodes that no longer exist (confirmed with a live
// GET, since our Node cache may lag): no kubelet will ever confirm their termination, and their
// controllers replace them once they are gone (upstream PodGC's orphaned pods).
func (c *Controller) collectOrphanedPods(ctx context.Context, nodes map[string]bool) {
	for _, nodeName := range c.pods.ListIndexFuncValues(nodeNameIndex) {
		if nodes[nodeName] {
			continue
		}
		if _, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			continue
		}
		objs, _ := c.pods.ByIndex(nodeNameIndex, nodeName)
		for _, o := range objs {
			p := o.(*v1.Pod)
			zero := int64(0)
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
				Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.log.Warn("delete orphaned pod failed", "pod", p.Namespace+"/"+p.Name, "node", nodeName, "err", err)
				continue
			}
			c.log.Info("deleted pod bound to a deleted node", "pod", p.Namespace+"/"+p.Name, "node", nodeName)
		}
	}
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// monitorNode notes new heartbeats (by local clock, so skew between kubelet and controller does not
// matter), marks a silent Node Unknown, and keeps its NoExecute taints in line with Ready.
func (c *Controller) monitorNode(ctx context.Context, n *v1.Node, now time.Time) error {
	h := c.health[n.Name]
	if h == nil {
		h = &health{probe: now}
		c.health[n.Name] = h
	}
	if lease, err := c.leases.Leases(LeaseNamespace).Get(n.Name); err == nil && lease.Spec.RenewTime != nil {
		if rt := lease.Spec.RenewTime.Time; !rt.Equal(h.leaseTime) {
			h.leaseTime, h.probe = rt, now
		}
	}
	rc := readyCondition(n)
	if rc != nil && !rc.LastHeartbeatTime.Time.Equal(h.heartbeat) {
		h.heartbeat, h.probe = rc.LastHeartbeatTime.Time, now
	}
	if rc == nil && now.Sub(h.probe) <= c.opts.GracePeriod {
		return nil // a new Node whose kubelet has not posted status yet: give it the grace period
	}
	status := v1.ConditionUnknown
	if rc != nil {
		status = rc.Status
	}
	if now.Sub(h.probe) > c.opts.GracePeriod && status != v1.ConditionUnknown {
		if err := c.markUnknown(ctx, n.Name, now); err != nil {
			return err
		}
		status = v1.ConditionUnknown
		c.markPodsNotReady(ctx, n.Name)
	}
	if err := c.reconcileTaints(ctx, n.Name, status, now); err != nil {
		return err
	}
	return c.reconcilePressureTaints(ctx, n.Name, now)
}

// markUnknown sets every condition the kubelet posts to Unknown, reason NodeStatusUnknown.
func (c *Controller) markUnknown(ctx context.Context, name string, now time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ts := metav1.NewTime(now)
		types := []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
		for _, t := range types {
			found := false
			for i := range n.Status.Conditions {
				cond := &n.Status.Conditions[i]
				if cond.Type != t {
					continue
				}
				found = true
				if cond.Status != v1.ConditionUnknown {
					cond.Status, cond.LastTransitionTime = v1.ConditionUnknown, ts
				}
				cond.Reason, cond.Message = "NodeStatusUnknown", "Kubelet stopped posting node status."
			}
			if !found {
				n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: t, Status: v1.ConditionUnknown,
					Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.", LastHeartbeatTime: ts, LastTransitionTime: ts})
			}
		}
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.log.Info("node stopped posting status, marked Unknown", "node", name, "gracePeriod", c.opts.GracePeriod)
		return nil
	})
}

// markPodsNotReady sets Ready=False on the pods of a Node that went silent, so endpoints stop routing
// to them before they are evicted.
func (c *Controller) markPodsNotReady(ctx context.Context, nodeName string) {
	objs, _ := c.pods.ByIndex(nodeNameIndex, nodeName)
	for _, o := range objs {
		p := o.(*v1.Pod)
		cond := podutil.Condition(p, v1.PodReady)
		if cond == nil || cond.Status != v1.ConditionTrue || podspec.IsTerminal(p.Status.Phase) {
			continue
		}
		upd := p.DeepCopy()
		rc := podutil.Condition(upd, v1.PodReady)
		rc.Status, rc.LastTransitionTime = v1.ConditionFalse, metav1.Now()
		rc.Reason, rc.Message = "NodeNotReady", "node "+nodeName+" stopped posting status"
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("mark pod not ready failed", "pod", p.Namespace+"/"+p.Name, "node", nodeName, "err", err)
		}
	}
}

// conditionTaintKeys are the taint keys this controller manages.
var conditionTaintKeys = []string{v1.TaintNodeUnreachable, v1.TaintNodeNotReady}

// reconcileTaints keeps exactly the taints matching the Ready status: node.kubernetes.io/unreachable
// for Unknown, node.kubernetes.io/not-ready for False, each with NoExecute (eviction) and NoSchedule
// (no new pods, even from pods that tolerate the NoExecute one for a while), none for True.
func (c *Controller) reconcileTaints(ctx context.Context, name string, ready v1.ConditionStatus, now time.Time) error {
	want := ""
	switch ready {
	case v1.ConditionUnknown:
		want = v1.TaintNodeUnreachable
	case v1.ConditionFalse:
		want = v1.TaintNodeNotReady
	}
	n, err := c.nodes.Get(name)
	if err != nil {
		return nil
	}
	if !taintsNeedChange(n.Spec.Taints, want) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !taintsNeedChange(n.Spec.Taints, want) {
			return nil
		}
		var taints []v1.Taint
		for _, t := range n.Spec.Taints {
			if slices.Contains(conditionTaintKeys, t.Key) && t.Key != want {
				continue
			}
			taints = append(taints, t)
		}
		if want != "" {
			ts := metav1.NewTime(now)
			for _, effect := range []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute} {
				if !hasTaint(taints, want, effect) {
					taints = append(taints, v1.Taint{Key: want, Effect: effect, TimeAdded: &ts})
				}
			}
		}
		n.Spec.Taints = taints
		if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if want == "" {
			c.log.Info("node ready again, lifted condition taints", "node", name)
		} else {
			c.log.Info("tainted node", "node", name, "taint", want, "effects", "NoSchedule,NoExecute")
		}
		return nil
	})
}

func hasTaint(taints []v1.Taint, key string, effect v1.TaintEffect) bool {
	for _, t := range taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func taintsNeedChange(taints []v1.Taint, want string) bool {
	for _, t := range taints {
		if slices.Contains(conditionTaintKeys, t.Key) && t.Key != want {
			return true
		}
	}
	return want != "" && (!hasTaint(taints, want, v1.TaintEffectNoExecute) || !hasTaint(taints, want, v1.TaintEffectNoSchedule))
}

// evictAt returns when a pod must leave a Node with these NoExecute taints: now if a taint is not
// tolerated, else the earliest taint.timeAdded + tolerationSeconds among the matching tolerations
// (the shortest one per taint); ok is false when every taint is tolerated forever.
func (c *Controller) evictAt(pod *v1.Pod, taints []v1.Taint, now time.Time) (time.Time, bool) {
	var at time.Time
	found := false
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != v1.TaintEffectNoExecute {
			continue
		}
		added := now
		if taint.TimeAdded != nil {
			added = taint.TimeAdded.Time
		}
		var limit *time.Time
		tolerated := false
		for _, tol := range pod.Spec.Tolerations {
			if !tol.ToleratesTaint(c.logr, taint, false) {
				continue
			}
			tolerated = true
			if tol.TolerationSeconds == nil {
				continue
			}
			t := added.Add(time.Duration(max(0, *tol.TolerationSeconds)) * time.Second)
			if limit == nil || t.Before(*limit) {
				limit = &t
			}
		}
		if !tolerated {
			return now, true
		}
		// A bounded matching toleration limits the stay even when another matching one is unbounded
		// (upstream takes the minimum over the matching tolerations' seconds).
		if limit != nil {
			if !found || limit.Before(at) {
				at, found = *limit, true
			}
		}
	}
	return at, found
}

// evictPods deletes the pods on a NoExecute-tainted Node whose time is up.
func (c *Controller) evictPods(ctx context.Context, nodeName string, now time.Time) error {
	n, err := c.nodes.Get(nodeName)
	if err != nil {
		return nil
	}
	var noExec []v1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoExecute {
			noExec = append(noExec, t)
		}
	}
	if len(noExec) == 0 {
		return nil
	}
	objs, err := c.pods.ByIndex(nodeNameIndex, nodeName)
	if err != nil {
		return err
	}
	for _, o := range objs {
		p := o.(*v1.Pod)
		if p.DeletionTimestamp != nil || podspec.IsTerminal(p.Status.Phase) {
			continue
		}
		at, ok := c.evictAt(p, noExec, now)
		if !ok || at.After(now) {
			continue
		}
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		c.log.Info("evicted pod from tainted node", "pod", p.Namespace+"/"+p.Name, "node", nodeName)
	}
	return nil
}
