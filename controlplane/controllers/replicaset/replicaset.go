// Package replicaset is the ReplicaSet controller: it keeps spec.replicas active pods matching a
// ReplicaSet's selector, creating pods from its template with a controller ownerReference and deleting
// extras (unscheduled, then pending, then not-ready, then the newest first, as upstream ranks them),
// and reports replicas, fullyLabeledReplicas, readyReplicas, availableReplicas and terminatingReplicas
// in status (apps/v1 ReplicaSet semantics).
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/expectations"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/podspec"
)

// burstReplicas caps pod creations or deletions per sync (upstream BurstReplicas).
const burstReplicas = 500

// Controller reconciles ReplicaSets. Queue keys are "namespace/name" of ReplicaSets.
type Controller struct {
	client   kubernetes.Interface
	rsLister appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	exp      *expectations.Expectations
	*workloop.Loop
}

// New registers the controller's handlers on factory's ReplicaSet and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:   client,
		rsLister: factory.Apps().V1().ReplicaSets().Lister(),
		pods:     factory.Core().V1().Pods().Lister(),
		exp:      expectations.New(),
	}
	c.Loop = workloop.New("replicaset", c.reconcile, log)
	if _, err := factory.Apps().V1().ReplicaSets().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(c.exp.PodHandler("ReplicaSet", c.Add, nil)); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.rsLister.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || selector.Empty() {
		c.Log().Warn("invalid selector, ignoring ReplicaSet", "replicaset", key, "err", err)
		return nil
	}
	all, err := c.pods.Pods(ns).List(selector)
	if err != nil {
		return err
	}
	var owned, active []*v1.Pod
	for _, p := range all {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rs.UID {
			owned = append(owned, p)
			if podutil.IsActive(p) {
				active = append(active, p)
			}
		}
	}
	var manageErr error
	if rs.DeletionTimestamp == nil && c.exp.Satisfied(key) {
		manageErr = c.manageReplicas(ctx, key, rs, active)
	}
	requeue, err := c.updateStatus(ctx, rs, owned, active, selector)
	if err != nil {
		return err
	}
	if requeue > 0 {
		c.AddAfter(key, requeue)
	}
	return manageErr
}

// manageReplicas creates or deletes pods so that len(active) moves to spec.replicas.
func (c *Controller) manageReplicas(ctx context.Context, key string, rs *appsv1.ReplicaSet, active []*v1.Pod) error {
	want := int32(1)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	diff := len(active) - int(want)
	switch {
	case diff < 0:
		n := min(-diff, burstReplicas)
		c.exp.Expect(key, n, 0)
		var errs []error
		for range n {
			pod := podFromTemplate(rs)
			if _, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				c.exp.Observe(key, true)
				errs = append(errs, err)
				if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
					break // namespace terminating or template invalid: no point trying the rest now
				}
			}
		}
		c.Log().Info("created pods", "replicaset", key, "count", n-len(errs), "want", want)
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
					errs = append(errs, err)
				}
				continue
			}
			c.Log().Info("deleted pod", "replicaset", key, "pod", p.Name)
		}
		return errors.Join(errs...)
	}
	return nil
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
// name "<rs>-xxxxx" and a controller ownerReference that blocks owner deletion in foreground mode.
func podFromTemplate(rs *appsv1.ReplicaSet) *v1.Pod {
	pod := podutil.FromTemplate(&rs.Spec.Template, rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	pod.GenerateName = rs.Name + "-"
	return pod
}

// updateStatus writes the counts and observedGeneration when they change. It returns how long until a
// ready pod becomes available (minReadySeconds), so the caller can look again then.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, owned, active []*v1.Pod, selector labels.Selector) (time.Duration, error) {
	now := time.Now()
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	var st appsv1.ReplicaSetStatus
	st.Replicas = int32(len(active))
	st.ObservedGeneration = rs.Generation
	st.Conditions = rs.Status.Conditions
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
	var terminating int32
	for _, p := range owned {
		if p.DeletionTimestamp != nil && !podspec.IsTerminal(p.Status.Phase) {
			terminating++
		}
	}
	st.TerminatingReplicas = &terminating
	if equality.Semantic.DeepEqual(rs.Status, st) {
		return requeue, nil
	}
	updated := rs.DeepCopy()
	updated.Status = st
	if _, err := c.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("update status of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return requeue, nil
}
