// Package disruption is the PodDisruptionBudget controller (policy/v1 semantics, as
// kube-controller-manager's disruption controller): for each budget it finds the pods its selector
// matches, the number of pods expected (the scale of their controllers when maxUnavailable or a
// percentage minAvailable is used: a ReplicationController's or ReplicaSet's replicas, or the owning
// Deployment's, or a StatefulSet's), the pods
// desired healthy, and writes status currentHealthy, desiredHealthy, expectedPods,
// disruptionsAllowed, observedGeneration, the DisruptionAllowed condition, and prunes
// status.disruptedPods (evictions the API server recorded) once the pod is gone or after
// DeletionTimeout. A budget it cannot compute (a pod without a scalable controller) gets
// disruptionsAllowed 0 and DisruptionAllowed=False reason SyncFailed, as upstream's fail-safe.
package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// DeletionTimeout is how long an eviction recorded in status.disruptedPods keeps its pod out of
// currentHealthy while the pod is not yet seen terminating (upstream DeletionTimeout, 2 minutes).
const DeletionTimeout = 2 * time.Minute

// Controller reconciles PodDisruptionBudget status. Queue keys are "namespace/name" of budgets.
type Controller struct {
	client   kubernetes.Interface
	pdbs     policylisters.PodDisruptionBudgetLister
	pods     corelisters.PodLister
	rss      appslisters.ReplicaSetLister
	rcs      corelisters.ReplicationControllerLister
	deps     appslisters.DeploymentLister
	sets     appslisters.StatefulSetLister
	recorder *events.Recorder
	now      func() time.Time
	*workloop.Loop
}

// New registers the controller's handlers on factory's PodDisruptionBudget and Pod informers (and
// uses its ReplicaSet, ReplicationController, Deployment and StatefulSet listers for scale). now is the clock (nil: time.Now).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, now func() time.Time, log *slog.Logger) (*Controller, error) {
	if now == nil {
		now = time.Now
	}
	c := &Controller{
		client:   client,
		pdbs:     factory.Policy().V1().PodDisruptionBudgets().Lister(),
		pods:     factory.Core().V1().Pods().Lister(),
		rss:      factory.Apps().V1().ReplicaSets().Lister(),
		rcs:      factory.Core().V1().ReplicationControllers().Lister(),
		deps:     factory.Apps().V1().Deployments().Lister(),
		sets:     factory.Apps().V1().StatefulSets().Lister(),
		recorder: events.New(client, "controllermanager"),
		now:      now,
	}
	c.Loop = workloop.New("disruption", c.reconcile, log)
	if _, err := factory.Policy().V1().PodDisruptionBudgets().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPod,
		UpdateFunc: func(o, n any) { c.onPod(o); c.onPod(n) },
		DeleteFunc: c.onPod,
	}); err != nil {
		return nil, err
	}
	// Scale changes change expectedPods: ReplicaSets, ReplicationControllers and Deployments are only
	// read, not watched, as upstream; their pods' changes follow any scale change.
	factory.Apps().V1().ReplicaSets().Informer()
	factory.Core().V1().ReplicationControllers().Informer()
	factory.Apps().V1().Deployments().Informer()
	factory.Apps().V1().StatefulSets().Informer()
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

// onPod queues every budget in the pod's namespace whose selector matches the pod.
func (c *Controller) onPod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	all, err := c.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range all {
		if sel, err := selector(pdb); err == nil && sel.Matches(labels.Set(pod.Labels)) {
			c.Add(workloop.KeyOf(pdb.Namespace, pdb.Name))
		}
	}
}

// selector is the budget's pod selector: nil selects nothing, empty every pod (policy/v1).
func selector(pdb *policyv1.PodDisruptionBudget) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	status, recheck, syncErr := c.compute(pdb)
	if syncErr != nil {
		c.recorder.Eventf(pdb, v1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", syncErr)
		status = failSafe(pdb, syncErr)
	}
	if err := c.writeStatus(ctx, pdb, status); err != nil {
		return err
	}
	if recheck > 0 {
		c.AddAfter(key, recheck)
	}
	return nil
}

// compute returns the budget's new status and, when an entry of disruptedPods will expire, how long
// until the budget must be looked at again.
func (c *Controller) compute(pdb *policyv1.PodDisruptionBudget) (policyv1.PodDisruptionBudgetStatus, time.Duration, error) {
	st := *pdb.Status.DeepCopy()
	sel, err := selector(pdb)
	if err != nil {
		return st, 0, err
	}
	pods, err := c.pods.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return st, 0, err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, v1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, err := c.expectedCount(pdb, pods)
	if err != nil {
		return st, 0, err
	}
	now := c.now()
	disrupted, recheck := c.disruptedPods(pdb, pods, now)
	healthy := int32(0)
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[p.Name]; ok {
			continue
		}
		if podutil.IsReady(p) {
			healthy++
		}
	}
	allowed := max(healthy-desired, 0)
	if expected <= 0 {
		allowed = 0
	}
	st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods = healthy, desired, expected
	st.DisruptionsAllowed, st.DisruptedPods, st.ObservedGeneration = allowed, disrupted, pdb.Generation
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.InsufficientPodsReason, ObservedGeneration: pdb.Generation}
	if allowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	apimeta.SetStatusCondition(&st.Conditions, cond)
	return st, recheck, nil
}

// expectedCount is upstream getExpectedPodCount: with an integer minAvailable, the pods matched and
// minAvailable; otherwise the summed scale of the pods' controllers and the healthy count the budget
// asks of it (percentages rounded up).
func (c *Controller) expectedCount(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod) (expected, desired int32, err error) {
	minA, maxU := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable
	if maxU == nil && (minA == nil || minA.Type == intstr.Int) {
		if minA != nil {
			desired = minA.IntVal
		}
		return int32(len(pods)), desired, nil
	}
	if expected, err = c.expectedScale(pdb, pods); err != nil {
		return 0, 0, err
	}
	if maxU != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(maxU, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, max(expected-int32(n), 0), nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(minA, int(expected), true)
	if err != nil {
		return 0, 0, err
	}
	return expected, int32(n), nil
}

// expectedScale sums spec.replicas of each distinct controller of pods: a ReplicationController, a
// ReplicaSet, or the Deployment owning it, or a StatefulSet (upstream's finders for the workloads nodekit serves with a
// scale).
func (c *Controller) expectedScale(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod) (int32, error) {
	seen := map[types.UID]bool{}
	var total int32
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			return 0, fmt.Errorf("found no controller ref for pod %q", p.Name)
		}
		uid, scale, err := c.scaleOf(pdb.Namespace, ref)
		if err != nil {
			return 0, fmt.Errorf("pod %q: %w", p.Name, err)
		}
		if !seen[uid] {
			seen[uid] = true
			total += scale
		}
	}
	return total, nil
}

// scaleOf returns the UID and replicas of the scalable controller behind ref.
func (c *Controller) scaleOf(ns string, ref *metav1.OwnerReference) (types.UID, int32, error) {
	if ref.Kind == "ReplicationController" && ref.APIVersion == "v1" {
		rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
		if err != nil {
			return "", 0, err
		}
		if rc.UID != ref.UID {
			return "", 0, fmt.Errorf("ReplicationController %s has UID %s, not %s", rc.Name, rc.UID, ref.UID)
		}
		return rc.UID, deref(rc.Spec.Replicas), nil
	}
	if ref.Kind == "StatefulSet" && ref.APIVersion == "apps/v1" {
		s, err := c.sets.StatefulSets(ns).Get(ref.Name)
		if err != nil {
			return "", 0, err
		}
		if s.UID != ref.UID {
			return "", 0, fmt.Errorf("StatefulSet %s has UID %s, not %s", s.Name, s.UID, ref.UID)
		}
		return s.UID, deref(s.Spec.Replicas), nil
	}
	if ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" {
		return "", 0, fmt.Errorf("controller %s %s has no scale nodekit's disruption controller reads (ReplicationControllers, ReplicaSets, Deployments and StatefulSets)", ref.Kind, ref.Name)
	}
	rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
	if err != nil {
		return "", 0, err
	}
	if rs.UID != ref.UID {
		return "", 0, fmt.Errorf("ReplicaSet %s has UID %s, not %s", rs.Name, rs.UID, ref.UID)
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" && dref.APIVersion == "apps/v1" {
		d, err := c.deps.Deployments(ns).Get(dref.Name)
		if err == nil && d.UID == dref.UID {
			return d.UID, deref(d.Spec.Replicas), nil
		}
	}
	return rs.UID, deref(rs.Spec.Replicas), nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// disruptedPods keeps the entries of status.disruptedPods whose pod still exists, is not
// terminating, and was evicted less than DeletionTimeout ago; recheck is the time until the first
// kept entry expires (0 when none).
func (c *Controller) disruptedPods(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod, now time.Time) (map[string]metav1.Time, time.Duration) {
	if len(pdb.Status.DisruptedPods) == 0 {
		return nil, 0
	}
	byName := map[string]*v1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	kept := map[string]metav1.Time{}
	var recheck time.Duration
	for name, at := range pdb.Status.DisruptedPods {
		p := byName[name]
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		left := at.Add(DeletionTimeout).Sub(now)
		if left <= 0 {
			c.Log().Info("eviction not confirmed in time: pod counts again", "pdb", pdb.Namespace+"/"+pdb.Name, "pod", name)
			continue
		}
		kept[name] = at
		if recheck == 0 || left < recheck {
			recheck = left
		}
	}
	if len(kept) == 0 {
		return nil, 0
	}
	return kept, recheck
}

// failSafe is the status of a budget whose expected pods could not be computed: no disruptions.
func failSafe(pdb *policyv1.PodDisruptionBudget, err error) policyv1.PodDisruptionBudgetStatus {
	st := *pdb.Status.DeepCopy()
	st.DisruptionsAllowed, st.ObservedGeneration = 0, pdb.Generation
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.SyncFailedReason, Message: err.Error(), ObservedGeneration: pdb.Generation})
	return st
}

func (c *Controller) writeStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, st policyv1.PodDisruptionBudgetStatus) error {
	if equality.Semantic.DeepEqual(pdb.Status, st) {
		return nil
	}
	n := pdb.DeepCopy()
	n.Status = st
	_, err := c.client.PolicyV1().PodDisruptionBudgets(n.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}
