// Package daemonset is the DaemonSet controller (apps/v1 semantics): one pod per eligible node
// (nodeSelector, required node affinity, taints against the pod's tolerations plus the ones every
// daemon pod gets), each pod created with required node affinity matchFields metadata.name=<node> so
// the scheduler binds it there; ControllerRevisions as history (controller-revision-hash label);
// RollingUpdate with maxUnavailable or maxSurge, and OnDelete; status desired/current/misscheduled/
// ready/available/updated/unavailable counts and observedGeneration; SuccessfulCreate,
// FailedCreate and SuccessfulDelete events on the DaemonSet.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/expectations"
	"github.com/nodekit/nodekit/controlplane/controllers/history"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/podspec"
)

// Controller reconciles DaemonSets. Queue keys are "namespace/name" of DaemonSets.
type Controller struct {
	client    kubernetes.Interface
	dsLister  appslisters.DaemonSetLister
	revLister appslisters.ControllerRevisionLister
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	exp       *expectations.Expectations
	recorder  *events.Recorder
	*workloop.Loop
}

// New registers the controller's handlers on factory's DaemonSet, ControllerRevision, Pod and Node
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:    client,
		dsLister:  factory.Apps().V1().DaemonSets().Lister(),
		revLister: factory.Apps().V1().ControllerRevisions().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
		nodes:     factory.Core().V1().Nodes().Lister(),
		exp:       expectations.New(),
		recorder:  events.New(client, "daemonset-controller"),
	}
	c.Loop = workloop.New("daemonset", c.reconcile, log)
	if _, err := factory.Apps().V1().DaemonSets().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Apps().V1().ControllerRevisions().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.EnqueueController("DaemonSet", obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(c.exp.PodHandler("DaemonSet", c.Add, nil)); err != nil {
		return nil, err
	}
	// Any node change can change where daemon pods belong: look at every DaemonSet again.
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		UpdateFunc: func(o, n any) { c.onNodeUpdate(o.(*v1.Node), n.(*v1.Node)) },
		DeleteFunc: func(any) { c.enqueueAll() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

func (c *Controller) enqueueAll() {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		c.Add(workloop.KeyOf(ds.Namespace, ds.Name))
	}
}

// onNodeUpdate requeues every DaemonSet when something placement or readiness depends on changed
// (heartbeats alone do not).
func (c *Controller) onNodeUpdate(o, n *v1.Node) {
	if equality.Semantic.DeepEqual(o.Labels, n.Labels) && equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) &&
		o.Spec.Unschedulable == n.Spec.Unschedulable {
		return
	}
	c.enqueueAll()
}

// nodeState is what one node holds of a DaemonSet.
type nodeState struct {
	node                         *v1.Node
	shouldRun, shouldContinueRun bool
	pods                         []*v1.Pod // every owned pod targeting the node, oldest first
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	if ds.DeletionTimestamp != nil {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || selector.Empty() {
		c.Log().Warn("invalid selector, ignoring DaemonSet", "daemonset", key, "err", err)
		return nil
	}
	revs, err := history.List(c.revLister, ds, selector)
	if err != nil {
		return err
	}
	cur, err := history.Ensure(ctx, c.client, history.Owner{Object: ds, Kind: appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Template: &ds.Spec.Template, CollisionCount: ds.Status.CollisionCount,
		SetCollisionCount: func(ctx context.Context, n int32) error {
			upd := ds.DeepCopy()
			upd.Status.CollisionCount = &n
			_, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
			return err
		}}, revs)
	if err != nil {
		return err
	}
	hash := cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	states, orphans, owned, err := c.placement(ds, selector)
	if err != nil {
		return err
	}
	var syncErr error
	if c.exp.Satisfied(key) {
		syncErr = c.manage(ctx, key, ds, states, orphans, hash)
	}
	if err := history.Cleanup(ctx, c.client, ds.Spec.RevisionHistoryLimit, revs, owned, cur); err != nil {
		syncErr = errors.Join(syncErr, err)
	}
	requeue, err := c.updateStatus(ctx, ds, states, hash)
	if err != nil {
		return errors.Join(syncErr, err)
	}
	if requeue > 0 {
		c.AddAfter(key, requeue)
	}
	return syncErr
}

// placement returns, per node (sorted by name), where ds should run and the owned pods there; the
// owned pods whose node does not exist; and every owned pod.
func (c *Controller) placement(ds *appsv1.DaemonSet, selector labels.Selector) ([]*nodeState, []*v1.Pod, []*v1.Pod, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := c.pods.Pods(ds.Namespace).List(selector)
	if err != nil {
		return nil, nil, nil, err
	}
	byNode := map[string]*nodeState{}
	var states []*nodeState
	for _, n := range nodes {
		st := &nodeState{node: n}
		st.shouldRun, st.shouldContinueRun = placement(ds, n)
		byNode[n.Name] = st
		states = append(states, st)
	}
	sort.Slice(states, func(i, j int) bool { return states[i].node.Name < states[j].node.Name })
	var orphans, owned []*v1.Pod
	for _, p := range all {
		if !metav1.IsControlledBy(p, ds) {
			continue
		}
		owned = append(owned, p)
		if st, ok := byNode[targetNode(p)]; ok {
			st.pods = append(st.pods, p)
		} else {
			orphans = append(orphans, p)
		}
	}
	for _, st := range states {
		sort.Slice(st.pods, func(i, j int) bool { return olderFirst(st.pods[i], st.pods[j]) })
	}
	return states, orphans, owned, nil
}

func olderFirst(a, b *v1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// running returns the pods of st that are neither being deleted nor finished.
func (st *nodeState) running() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range st.pods {
		if podutil.IsActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// manage decides the creations and deletions of one sync (upstream manage + rollingUpdate) and issues
// them.
func (c *Controller) manage(ctx context.Context, key string, ds *appsv1.DaemonSet, states []*nodeState, orphans []*v1.Pod, hash string) error {
	surge, unavailable := c.fenceposts(ds, states)
	var create []string
	var del []*v1.Pod
	del = append(del, activeOnly(orphans)...) // their node is gone
	for _, st := range states {
		switch {
		case st.shouldContinueRun || (st.shouldRun && len(st.pods) == 0):
			for _, p := range st.pods {
				if p.DeletionTimestamp == nil && podspec.IsTerminal(p.Status.Phase) {
					del = append(del, p) // failed or succeeded: replaced by a fresh pod
				}
			}
			run := st.running()
			if len(run) == 0 && st.shouldRun {
				create = append(create, st.node.Name)
			}
			del = append(del, duplicates(run, hash, surge > 0)...)
		default:
			del = append(del, activeOnly(st.pods)...) // no longer eligible
		}
	}
	if ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		more, moreDel := rollingUpdate(ds, states, hash, surge, unavailable, time.Now())
		create, del = append(create, more...), append(del, moreDel...)
	}
	del = unique(del)
	if len(create) == 0 && len(del) == 0 {
		return nil
	}
	c.exp.Expect(key, len(create), len(del))
	var errs []error
	for _, node := range create {
		pod := newPod(ds, node, hash)
		created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			c.exp.Observe(key, true)
			c.recorder.Eventf(ds, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			errs = append(errs, err)
			continue
		}
		c.recorder.Eventf(ds, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
		c.Log().Info("created pod", "daemonset", key, "pod", created.Name, "node", node)
	}
	for _, p := range del {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil {
			c.exp.Observe(key, false)
			if !apierrors.IsNotFound(err) {
				c.recorder.Eventf(ds, v1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				errs = append(errs, err)
			}
			continue
		}
		c.recorder.Eventf(ds, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		c.Log().Info("deleted pod", "daemonset", key, "pod", p.Name, "node", targetNode(p))
	}
	return errors.Join(errs...)
}

func activeOnly(pods []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func unique(pods []*v1.Pod) []*v1.Pod {
	seen := map[string]bool{}
	var out []*v1.Pod
	for _, p := range pods {
		if !seen[string(p.UID)+"/"+p.Name] {
			seen[string(p.UID)+"/"+p.Name] = true
			out = append(out, p)
		}
	}
	return out
}

// duplicates returns the running pods of one node beyond the one it should keep (the oldest); with
// surge, the oldest updated and the oldest old pod may both stay while the old one is replaced.
func duplicates(run []*v1.Pod, hash string, surge bool) []*v1.Pod {
	if len(run) <= 1 {
		return nil
	}
	if !surge {
		return run[1:]
	}
	var keepNew, keepOld bool
	var extra []*v1.Pod
	for _, p := range run {
		isNew := p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash
		switch {
		case isNew && !keepNew:
			keepNew = true
		case !isNew && !keepOld:
			keepOld = true
		default:
			extra = append(extra, p)
		}
	}
	return extra
}

// fenceposts resolves maxSurge and maxUnavailable against the number of nodes that should run the
// pod, rounding up as upstream does for DaemonSets; both zero becomes maxUnavailable 1.
func (c *Controller) fenceposts(ds *appsv1.DaemonSet, states []*nodeState) (int, int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil {
		return 0, 1
	}
	desired := 0
	for _, st := range states {
		if st.shouldRun {
			desired++
		}
	}
	scaled := func(v *intstr.IntOrString) int {
		if v == nil {
			return 0
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, desired, true)
		if err != nil {
			return 0
		}
		return n
	}
	s, u := scaled(ru.MaxSurge), scaled(ru.MaxUnavailable)
	if s == 0 && u == 0 {
		u = 1
	}
	if s > 0 {
		u = 0 // upstream: with surge, availability is kept by creating before deleting
	}
	return s, u
}

// updatedOn returns the node's running updated (hash) and old pods (the oldest of each), and ok false
// when a node holds more than one of either (manage trims those first).
func updatedOn(st *nodeState, hash string) (newPod, oldPod *v1.Pod, ok bool) {
	for _, p := range st.running() {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// rollingUpdate returns the nodes that get an updated pod and the old pods to delete in this sync
// (upstream rollingUpdate). Without surge, old pods are deleted while fewer than maxUnavailable nodes
// lack an available pod (an unavailable old pod may always go); manage creates the replacement next
// sync. With surge, an updated pod is created next to an available old one on up to maxSurge nodes,
// and the old one deleted once the new one is available.
func rollingUpdate(ds *appsv1.DaemonSet, states []*nodeState, hash string, surge, maxUnavailable int, now time.Time) ([]string, []*v1.Pod) {
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	available := func(p *v1.Pod) bool { return podutil.IsReady(p) && podutil.AvailableIn(p, minReady, now) == 0 }
	var create []string
	var del []*v1.Pod
	if surge == 0 {
		numUnavailable := 0
		var candidates []*v1.Pod
		for _, st := range states {
			if !st.shouldRun {
				continue
			}
			newPod, oldPod, ok := updatedOn(st, hash)
			if !ok {
				continue
			}
			switch {
			case oldPod == nil && (newPod == nil || !available(newPod)):
				numUnavailable++
			case newPod != nil:
			case !available(oldPod):
				del = append(del, oldPod) // already unavailable: replacing it costs nothing
			default:
				candidates = append(candidates, oldPod)
			}
		}
		if room := maxUnavailable - numUnavailable - len(del); room > 0 {
			del = append(del, candidates[:min(room, len(candidates))]...)
		}
		return nil, del
	}
	surging := 0
	var candidates []string
	for _, st := range states {
		if !st.shouldRun {
			continue
		}
		newPod, oldPod, ok := updatedOn(st, hash)
		if !ok || oldPod == nil {
			continue
		}
		switch {
		case newPod != nil:
			if available(newPod) {
				del = append(del, oldPod)
			} else {
				surging++
			}
		case !available(oldPod):
			create = append(create, st.node.Name) // old one is down anyway: replace at once
		default:
			candidates = append(candidates, st.node.Name)
		}
	}
	if room := surge - surging; room > 0 {
		create = append(create, candidates[:min(room, len(candidates))]...)
	}
	return create, del
}

// updateStatus writes the counts when they change; it returns how long until a ready pod becomes
// available (minReadySeconds), for a later look.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, states []*nodeState, hash string) (time.Duration, error) {
	now := time.Now()
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	st := ds.Status.DeepCopy()
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = 0, 0, 0
	st.NumberReady, st.NumberAvailable, st.UpdatedNumberScheduled, st.NumberUnavailable = 0, 0, 0, 0
	st.ObservedGeneration = ds.Generation
	var requeue time.Duration
	for _, ns := range states {
		run := ns.running()
		if !ns.shouldRun {
			if len(run) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(run) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		p := run[0]
		for _, q := range run {
			if q.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
				st.UpdatedNumberScheduled++
				if podutil.IsReady(q) || !podutil.IsReady(p) {
					p = q // the updated pod counts once it is ready
				}
				break
			}
		}
		if podutil.IsReady(p) {
			st.NumberReady++
			if wait := podutil.AvailableIn(p, minReady, now); wait == 0 {
				st.NumberAvailable++
			} else if requeue == 0 || wait < requeue {
				requeue = wait
			}
		}
	}
	st.NumberUnavailable = max(0, st.DesiredNumberScheduled-st.NumberAvailable)
	if equality.Semantic.DeepEqual(&ds.Status, st) {
		return requeue, nil
	}
	upd := ds.DeepCopy()
	upd.Status = *st
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("update status of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return requeue, nil
}
