// Package replicaset is the ReplicaSet controller, which also runs ReplicationControllers (core/v1)
// through a conversion to the ReplicaSet view, as upstream's replication manager does. It keeps
// spec.replicas active pods matching an owner's selector: it adopts orphans that match (a controller
// ownerReference) and releases owned pods that no longer match, creates pods from the template and
// deletes extras (unscheduled, then pending, then not-ready, then the newest first, as upstream ranks
// them), records SuccessfulCreate/FailedCreate/SuccessfulDelete/FailedDelete events, and reports
// replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration, the
// ReplicaFailure condition and (ReplicaSets only) terminatingReplicas in status.
package replicaset

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/controllerref"
	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/expectations"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/podspec"
)

// burstReplicas caps pod creations or deletions per sync (upstream BurstReplicas).
const burstReplicas = 500

// ownerKind is what the controller needs of one pod-owning kind: its GroupVersionKind (for
// ownerReferences), its objects seen as apps/v1 ReplicaSets together with the object itself (events are
// recorded on it), its informer, and the write of a new status.
type ownerKind struct {
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
	// get returns the ReplicaSet view of ns/name and the object; a NotFound error when it is gone.
	get func(ns, name string) (*appsv1.ReplicaSet, runtime.Object, error)
	// updateStatus writes st as the status of obj.
	updateStatus func(ctx context.Context, c kubernetes.Interface, obj runtime.Object, st appsv1.ReplicaSetStatus) error
	// fresh reads ns/name from the API server (not the cache).
	fresh func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error)
	// terminatingReplicas: the kind's status reports terminatingReplicas (ReplicaSets do, RCs do not).
	terminatingReplicas bool
}

// Controller reconciles the objects of one kind (ReplicaSets or ReplicationControllers). Queue keys
// are their "namespace/name".
type Controller struct {
	client   kubernetes.Interface
	kind     ownerKind
	pods     corelisters.PodLister
	exp      *expectations.Expectations
	recorder *events.Recorder
	*workloop.Loop
}

// New registers the ReplicaSet controller's handlers on factory's ReplicaSet and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	lister := factory.Apps().V1().ReplicaSets().Lister()
	return newController(client, factory, "replicaset", ownerKind{
		gvk:      appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		informer: factory.Apps().V1().ReplicaSets().Informer(),
		get: func(ns, name string) (*appsv1.ReplicaSet, runtime.Object, error) {
			rs, err := lister.ReplicaSets(ns).Get(name)
			return rs, rs, err
		},
		updateStatus: func(ctx context.Context, c kubernetes.Interface, obj runtime.Object, st appsv1.ReplicaSetStatus) error {
			rs := obj.(*appsv1.ReplicaSet).DeepCopy()
			rs.Status = st
			_, err := c.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
			return err
		},
		fresh: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		terminatingReplicas: true,
	}, log)
}

func newController(client kubernetes.Interface, factory informers.SharedInformerFactory, name string, kind ownerKind, log *slog.Logger) (*Controller, error) {
	podInformer := factory.Core().V1().Pods().Informer()
	c := &Controller{
		client:   client,
		kind:     kind,
		pods:     factory.Core().V1().Pods().Lister(),
		exp:      expectations.New(),
		recorder: events.New(client, name+"-controller"),
	}
	c.Loop = workloop.New(name, c.reconcile, log)
	if _, err := kind.informer.AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := podInformer.AddEventHandler(c.exp.PodHandler(kind.gvk.Kind, c.Add, c.orphanSeen)); err != nil {
		return nil, err
	}
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

// orphanSeen enqueues every owner of the kind whose selector matches a live pod without a controller,
// so that it can adopt the pod (upstream getPodReplicaSets on add and update).
func (c *Controller) orphanSeen(pod *v1.Pod, deleted bool) {
	if deleted || pod.DeletionTimestamp != nil || metav1.GetControllerOf(pod) != nil {
		return
	}
	for _, obj := range c.kind.informer.GetStore().List() {
		m, ok := obj.(metav1.Object)
		if !ok || m.GetNamespace() != pod.Namespace {
			continue
		}
		rs, _, err := c.kind.get(m.GetNamespace(), m.GetName())
		if err != nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.Add(workloop.KeyOf(rs.Namespace, rs.Name))
		}
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, obj, err := c.kind.get(ns, name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || selector.Empty() {
		c.Log().Warn("invalid selector, ignoring owner", "kind", c.kind.gvk.Kind, "owner", key, "err", err)
		return nil
	}
	owned, err := c.claimPods(ctx, rs, obj, selector)
	if err != nil {
		return err
	}
	var active []*v1.Pod
	for _, p := range owned {
		if podutil.IsActive(p) {
			active = append(active, p)
		}
	}
	var manageErr error
	if rs.DeletionTimestamp == nil && c.exp.Satisfied(key) {
		manageErr = c.manageReplicas(ctx, key, rs, obj, active)
	}
	requeue, err := c.updateStatus(ctx, rs, obj, owned, active, manageErr)
	if err != nil {
		return err
	}
	if requeue > 0 {
		c.AddAfter(key, requeue)
	}
	return manageErr
}

// claimPods returns the pods rs controls after adopting the live orphans in its namespace that match
// its selector and releasing the ones it controls that no longer match (controllerref.Claim, as
// upstream's PodControllerRefManager; adoption first rechecks rs is not being deleted).
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, obj runtime.Object, selector labels.Selector) ([]*v1.Pod, error) {
	all, err := c.pods.Pods(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	owner, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s has no object metadata", c.kind.gvk.Kind, rs.Namespace, rs.Name)
	}
	return controllerref.Claim(ctx, &controllerref.Manager{
		Owner: owner, Kind: c.kind.gvk, Selector: selector, Log: c.Log(),
		Patch: controllerref.PodPatch(c.client, rs.Namespace),
		CanAdopt: controllerref.RecheckDeletion(owner, func(ctx context.Context) (metav1.Object, error) {
			return c.kind.fresh(ctx, c.client, rs.Namespace, rs.Name)
		}),
	}, all)
}

// manageReplicas creates or deletes pods so that len(active) moves to spec.replicas.
func (c *Controller) manageReplicas(ctx context.Context, key string, rs *appsv1.ReplicaSet, obj runtime.Object, active []*v1.Pod) error {
	diff := len(active) - int(replicas(rs))
	switch {
	case diff < 0:
		n := min(-diff, burstReplicas)
		c.exp.Expect(key, n, 0)
		var errs []error
		made := 0
		for i := range n {
			created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, c.podFromTemplate(rs), metav1.CreateOptions{})
			if err != nil {
				c.recorder.Eventf(obj, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				errs = append(errs, err)
				if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
					// namespace terminating or template invalid: no point trying the rest now
					for range n - i {
						c.exp.Observe(key, true)
					}
					break
				}
				c.exp.Observe(key, true)
				continue
			}
			made++
			c.recorder.Eventf(obj, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
		}
		c.Log().Info("created pods", "kind", c.kind.gvk.Kind, "owner", key, "count", made, "want", replicas(rs))
		return errors.Join(errs...)
	case diff > 0:
		n := min(diff, burstReplicas)
		victims := append([]*v1.Pod(nil), active...)
		sort.SliceStable(victims, func(i, j int) bool { return deleteFirst(victims[i], victims[j]) })
		victims = victims[:n]
		c.exp.Expect(key, 0, n)
		var errs []error
		for _, p := range victims {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil {
				c.exp.Observe(key, false)
				if !apierrors.IsNotFound(err) {
					c.recorder.Eventf(obj, v1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
					errs = append(errs, err)
				}
				continue
			}
			c.recorder.Eventf(obj, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
			c.Log().Info("deleted pod", "kind", c.kind.gvk.Kind, "owner", key, "pod", p.Name)
		}
		return errors.Join(errs...)
	}
	return nil
}

// replicas is spec.replicas, 1 when unset (the API server's default).
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// deleteFirst ranks pods for scale-down as upstream's ActivePods ordering does: unassigned before
// assigned; Pending before Unknown before Running; not ready before ready; ready for less time
// first; more container restarts first; newer before older.
func deleteFirst(a, b *v1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	rank := map[v1.PodPhase]int{v1.PodPending: 0, v1.PodUnknown: 1, v1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	ra, rb := podutil.IsReady(a), podutil.IsReady(b)
	if ra != rb {
		return !ra
	}
	if ra && rb {
		ta, tb := podutil.ReadySince(a), podutil.ReadySince(b)
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
	}
	if ca, cb := restarts(a), restarts(b); ca != cb {
		return ca > cb
	}
	return a.CreationTimestamp.After(b.CreationTimestamp.Time)
}

func restarts(p *v1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n = max(n, s.RestartCount)
	}
	return n
}

// podFromTemplate returns a new pod for rs: its template's labels, annotations and spec, a generated
// name "<owner>-xxxxx" and a controller ownerReference that blocks owner deletion in foreground mode.
func (c *Controller) podFromTemplate(rs *appsv1.ReplicaSet) *v1.Pod {
	pod := podutil.FromTemplate(&rs.Spec.Template, rs, c.kind.gvk)
	pod.GenerateName = rs.Name + "-"
	return pod
}

// updateStatus writes the counts, observedGeneration and the ReplicaFailure condition when they
// change. It returns how long until a ready pod becomes available (minReadySeconds), so the caller can
// look again then.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, obj runtime.Object, owned, active []*v1.Pod, manageErr error) (time.Duration, error) {
	now := time.Now()
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	var st appsv1.ReplicaSetStatus
	st.Replicas = int32(len(active))
	st.ObservedGeneration = rs.Generation
	st.Conditions = replicaFailure(rs.Status.Conditions, manageErr, len(active)-int(replicas(rs)))
	templateLabels := labels.Set(rs.Spec.Template.Labels)
	var requeue time.Duration
	for _, p := range active {
		if templateLabels.AsSelector().Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if podutil.IsReady(p) {
			st.ReadyReplicas++
			if wait := podutil.AvailableIn(p, minReady, now); wait == 0 {
				st.AvailableReplicas++
			} else if requeue == 0 || wait < requeue {
				requeue = wait
			}
		}
	}
	if c.kind.terminatingReplicas {
		var terminating int32
		for _, p := range owned {
			if p.DeletionTimestamp != nil && !podspec.IsTerminal(p.Status.Phase) {
				terminating++
			}
		}
		st.TerminatingReplicas = &terminating
	}
	if equality.Semantic.DeepEqual(rs.Status, st) {
		return requeue, nil
	}
	if err := c.kind.updateStatus(ctx, c.client, obj, st); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("update status of %s %s/%s: %w", c.kind.gvk.Kind, rs.Namespace, rs.Name, err)
	}
	return requeue, nil
}

// replicaFailure sets the ReplicaFailure condition (reason FailedCreate when short of pods,
// FailedDelete when over, the error as message) when managing replicas failed and it is not set yet,
// and removes it once a sync succeeds, as upstream's calculateStatus does.
func replicaFailure(conds []appsv1.ReplicaSetCondition, manageErr error, diff int) []appsv1.ReplicaSetCondition {
	i := -1
	for j := range conds {
		if conds[j].Type == appsv1.ReplicaSetReplicaFailure {
			i = j
		}
	}
	switch {
	case manageErr != nil && i < 0:
		reason := "FailedCreate"
		if diff > 0 {
			reason = "FailedDelete"
		}
		return append(append([]appsv1.ReplicaSetCondition(nil), conds...), appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure,
			Status: v1.ConditionTrue, Reason: reason, Message: manageErr.Error(), LastTransitionTime: metav1.Now()})
	case manageErr == nil && i >= 0:
		return append(append([]appsv1.ReplicaSetCondition(nil), conds[:i]...), conds[i+1:]...)
	}
	return conds
}
