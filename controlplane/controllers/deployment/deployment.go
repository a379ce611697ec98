// Package deployment is the Deployment controller: it owns one ReplicaSet per pod template (named
// "<deployment>-<pod-template-hash>", the hash also added to the ReplicaSet's selector and pod labels),
// rolls from old ReplicaSets to the new one with the RollingUpdate (maxSurge / maxUnavailable) or
// Recreate strategy, records revisions in the deployment.kubernetes.io/revision annotation, prunes
// old ReplicaSets beyond revisionHistoryLimit, and reports replica counts and the Progressing and
// Available conditions (apps/v1 Deployment semantics).
package deployment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
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

	"github.com/nodekit/nodekit/controlplane/controllers/controllerref"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/podspec"
)

// Annotations and condition reasons as upstream writes them, so kubectl rollout status/history work.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"

	ReasonNewRSCreated          = "NewReplicaSetCreated"
	ReasonRSUpdated             = "ReplicaSetUpdated"
	ReasonNewRSAvailable        = "NewReplicaSetAvailable"
	ReasonProgressDeadline      = "ProgressDeadlineExceeded"
	ReasonMinimumReplicasAvail  = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavai = "MinimumReplicasUnavailable"
)

// Controller reconciles Deployments. Queue keys are "namespace/name" of Deployments.
type Controller struct {
	client   kubernetes.Interface
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	*workloop.Loop
}

// New registers the controller's handlers on factory's Deployment, ReplicaSet and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:   client,
		dLister:  factory.Apps().V1().Deployments().Lister(),
		rsLister: factory.Apps().V1().ReplicaSets().Lister(),
		pods:     factory.Core().V1().Pods().Lister(),
	}
	c.Loop = workloop.New("deployment", c.reconcile, log)
	if _, err := factory.Apps().V1().Deployments().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	byOwner := func(obj any) { c.EnqueueController("Deployment", obj) }
	if _, err := factory.Apps().V1().ReplicaSets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.replicaSetSeen,
		UpdateFunc: func(o, n any) {
			// a changed controllerRef wakes the previous owner too (it lost a ReplicaSet)
			if oldRS, ok := o.(*appsv1.ReplicaSet); ok && !equality.Semantic.DeepEqual(metav1.GetControllerOf(oldRS), controllerOf(n)) {
				byOwner(o)
			}
			c.replicaSetSeen(n)
		},
		DeleteFunc: byOwner,
	}); err != nil {
		return nil, err
	}
	// Recreate waits for the old pods to be gone: a pod deletion wakes its Deployment.
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
				if rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
					byOwner(rs)
				}
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	d, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || selector.Empty() {
		c.Log().Warn("invalid selector, ignoring Deployment", "deployment", key, "err", err)
		return nil
	}
	rss, err := c.claimReplicaSets(ctx, d, selector)
	if err != nil {
		return err
	}
	newRS, olds := splitReplicaSets(d, rss)
	if d.Spec.Paused || isScalingEvent(d, newRS, olds) {
		// A paused rollout does not move, and a scaling event (spec.replicas changed) first resizes
		// every active ReplicaSet in proportion; both still sync the new ReplicaSet's revision (upstream
		// sync with createIfNotExisted false).
		if newRS != nil {
			if newRS, err = c.ensureNewRS(ctx, d, newRS, olds, 0); err != nil {
				return err
			}
		}
		if err := c.proportionalScale(ctx, d, newRS, olds); err != nil {
			return err
		}
		return c.syncStatus(ctx, d, newRS, olds)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		newRS, err = c.rolloutRecreate(ctx, d, newRS, olds)
	default:
		newRS, err = c.rolloutRolling(ctx, d, newRS, olds)
	}
	if err != nil {
		return err
	}
	if err := c.cleanupHistory(ctx, d, olds); err != nil {
		return err
	}
	return c.syncStatus(ctx, d, newRS, olds)
}

// replicaSetSeen enqueues a ReplicaSet's controller, or, for an orphan, every Deployment of its
// namespace whose selector matches its labels, so that one of them adopts it (upstream
// getDeploymentsForReplicaSet).
func (c *Controller) replicaSetSeen(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if metav1.GetControllerOf(rs) != nil {
		c.EnqueueController("Deployment", rs)
		return
	}
	if rs.DeletionTimestamp != nil {
		return
	}
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range controllerref.Selecting(ds, func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, rs.Labels) {
		c.Enqueue(d)
	}
}

func controllerOf(obj any) *metav1.OwnerReference {
	if m, ok := obj.(metav1.Object); ok {
		return metav1.GetControllerOf(m)
	}
	return nil
}

// claimReplicaSets returns copies of the ReplicaSets d controls (the rollout updates replica counts
// on them locally), after adopting the orphans whose labels match selector and releasing owned ones
// that no longer match (upstream ClaimReplicaSets; adoption first rechecks d is not being deleted).
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	owned, err := controllerref.Claim(ctx, &controllerref.Manager{
		Owner: d, Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Selector: selector, Log: c.Log(),
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := c.client.AppsV1().ReplicaSets(d.Namespace).Patch(ctx, name, controllerref.PatchType, patch, metav1.PatchOptions{})
			return err
		},
		CanAdopt: controllerref.RecheckDeletion(d, func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		}),
	}, all)
	if err != nil {
		return nil, err
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(owned))
	for _, rs := range owned {
		rss = append(rss, rs.DeepCopy())
	}
	return rss, nil
}

// splitReplicaSets returns the ReplicaSet whose template equals the Deployment's (ignoring the hash
// label) and the others, oldest first.
func splitReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	sort.Slice(rss, func(i, j int) bool {
		if !rss[i].CreationTimestamp.Equal(&rss[j].CreationTimestamp) {
			return rss[i].CreationTimestamp.Before(&rss[j].CreationTimestamp)
		}
		return rss[i].Name < rss[j].Name
	})
	var newRS *appsv1.ReplicaSet
	var olds []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil && equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		olds = append(olds, rs)
	}
	return newRS, olds
}

func equalIgnoreHash(a, b *v1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return equality.Semantic.DeepEqual(a, b)
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// activeReplicas sums the spec replicas of rss.
func activeReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += rsReplicas(rs)
	}
	return n
}

// maxRevision is the highest revision annotation of rss (int64, as upstream parses it: an adopted
// ReplicaSet may carry any number), 0 for none.
func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if r, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64); err == nil && r > m {
			m = r
		}
	}
	return m
}

// ensureNewRS returns the new ReplicaSet, creating it with replicas when missing, and makes sure it
// carries the newest revision.
func (c *Controller) ensureNewRS(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet, replicas int32) (*appsv1.ReplicaSet, error) {
	revision := strconv.FormatInt(maxRevision(olds)+1, 10)
	if newRS != nil {
		// upstream getNewReplicaSet: the revision, and minReadySeconds follows the Deployment's
		if newRS.Annotations[RevisionAnnotation] == revision && newRS.Spec.MinReadySeconds == d.Spec.MinReadySeconds {
			return newRS, nil
		}
		upd := newRS.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[RevisionAnnotation] = revision
		upd.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		return c.client.AppsV1().ReplicaSets(d.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	}
	hash := podutil.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Annotations: map[string]string{
				RevisionAnnotation:        revision,
				DesiredReplicasAnnotation: strconv.Itoa(int(replicasOf(d))),
				MaxReplicasAnnotation:     strconv.Itoa(int(replicasOf(d) + maxSurge(d))),
			},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &replicas,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        *tmpl,
		},
	}
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A ReplicaSet of that name that is not ours (or not yet in the cache): bump the collision
		// count so the next hash differs, as upstream does.
		existing, getErr := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if getErr == nil && metav1.IsControlledBy(existing, d) && equalIgnoreHash(&existing.Spec.Template, &d.Spec.Template) {
			return existing, nil
		}
		upd := d.DeepCopy()
		cc := int32(0)
		if upd.Status.CollisionCount != nil {
			cc = *upd.Status.CollisionCount
		}
		cc++
		upd.Status.CollisionCount = &cc
		if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("replicaset %s exists with another template; collision count now %d", rs.Name, cc)
	}
	if err != nil {
		return nil, fmt.Errorf("create replicaset for deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	c.Log().Info("created replicaset", "deployment", d.Namespace+"/"+d.Name, "replicaset", created.Name, "revision", revision, "replicas", replicas)
	if err := c.setProgressing(ctx, d, ReasonNewRSCreated, fmt.Sprintf("Created new replica set %q", created.Name)); err != nil {
		return created, err
	}
	return created, nil
}

// scale sets rs's replicas (and the desired/max annotations) when they differ.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, replicas int32) error {
	desired := strconv.Itoa(int(replicasOf(d)))
	maxR := strconv.Itoa(int(replicasOf(d) + maxSurge(d)))
	if rsReplicas(rs) == replicas && rs.Annotations[DesiredReplicasAnnotation] == desired && rs.Annotations[MaxReplicasAnnotation] == maxR {
		return nil
	}
	upd := rs.DeepCopy()
	upd.Spec.Replicas = &replicas
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[DesiredReplicasAnnotation] = desired
	upd.Annotations[MaxReplicasAnnotation] = maxR
	out, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("scale replicaset %s/%s to %d: %w", rs.Namespace, rs.Name, replicas, err)
	}
	if rsReplicas(rs) != replicas {
		c.Log().Info("scaled replicaset", "deployment", d.Namespace+"/"+d.Name, "replicaset", rs.Name, "from", rsReplicas(rs), "to", replicas)
	}
	*rs = *out // rs is the rollout's own copy: keep it current for further steps in this sync
	return nil
}

// maxSurge resolves spec.strategy.rollingUpdate.maxSurge against replicas, rounding up (default 25%).
func maxSurge(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0
	}
	s, _ := resolveFenceposts(d)
	return s
}

// resolveFenceposts returns (maxSurge, maxUnavailable) as upstream resolves them: surge rounds up,
// unavailable rounds down, and both zero becomes unavailable 1.
func resolveFenceposts(d *appsv1.Deployment) (int32, int32) {
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			surge = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			unavail = *ru.MaxUnavailable
		}
	}
	n := int(replicasOf(d))
	s, err1 := intstr.GetScaledValueFromIntOrPercent(&surge, n, true)
	u, err2 := intstr.GetScaledValueFromIntOrPercent(&unavail, n, false)
	if err1 != nil || err2 != nil {
		return 0, 1
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

// available counts a ReplicaSet's available pods, never above its spec replicas: right after a
// scale-down the status still counts pods that are about to go.
func available(rs *appsv1.ReplicaSet) int32 {
	return min(rs.Status.AvailableReplicas, rsReplicas(rs))
}

// rolloutRolling scales the new ReplicaSet up within maxSurge and the old ones down within
// maxUnavailable (upstream rolloutRolling: reconcileNewReplicaSet, then reconcileOldReplicaSets with
// cleanupUnhealthyReplicas and scaleDownOldReplicaSetsForRollingUpdate).
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	want := replicasOf(d)
	surge, unavail := resolveFenceposts(d)
	total := activeReplicas(olds)
	if newRS == nil {
		initial := min(want, max(0, want+surge-total))
		if total == 0 {
			initial = want
		}
		var err error
		if newRS, err = c.ensureNewRS(ctx, d, nil, olds, initial); err != nil {
			return nil, err
		}
		return newRS, nil // the next sync (on its informer event) continues from fresh state
	}
	var err error
	if newRS, err = c.ensureNewRS(ctx, d, newRS, olds, 0); err != nil {
		return nil, err
	}
	total += rsReplicas(newRS)

	// Scale up the new ReplicaSet.
	switch cur := rsReplicas(newRS); {
	case cur > want:
		return newRS, c.scale(ctx, d, newRS, want)
	case cur < want:
		up := min(want+surge-total, want-cur)
		if up > 0 {
			return newRS, c.scale(ctx, d, newRS, cur+up)
		}
	default:
		if err := c.scale(ctx, d, newRS, cur); err != nil { // refresh desired/max annotations
			return newRS, err
		}
	}

	// Scale down old ReplicaSets without going under want−maxUnavailable available pods.
	minAvailable := want - unavail
	newUnavailable := rsReplicas(newRS) - available(newRS)
	maxScaledDown := total - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return newRS, nil
	}
	var errs []error
	// First the old pods that are not available anyway.
	for _, rs := range olds {
		if maxScaledDown <= 0 {
			break
		}
		unhealthy := rsReplicas(rs) - available(rs)
		if unhealthy <= 0 {
			continue
		}
		down := min(unhealthy, maxScaledDown)
		if err := c.scale(ctx, d, rs, rsReplicas(rs)-down); err != nil {
			errs = append(errs, err)
			continue
		}
		maxScaledDown -= down
	}
	if len(errs) > 0 {
		return newRS, errors.Join(errs...)
	}
	// Then available old pods, as far as the availability floor allows.
	availableAll := available(newRS)
	for _, rs := range olds {
		availableAll += available(rs)
	}
	budget := availableAll - minAvailable
	for _, rs := range olds {
		if budget <= 0 {
			break
		}
		if rsReplicas(rs) == 0 {
			continue
		}
		down := min(rsReplicas(rs), budget)
		if err := c.scale(ctx, d, rs, rsReplicas(rs)-down); err != nil {
			return newRS, err
		}
		budget -= down
	}
	return newRS, nil
}

// rolloutRecreate scales every old ReplicaSet to zero, waits until none of their pods is left
// running, then brings the new ReplicaSet to full size.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	scaledDown := false
	for _, rs := range olds {
		if rsReplicas(rs) != 0 {
			if err := c.scale(ctx, d, rs, 0); err != nil {
				return newRS, err
			}
			scaledDown = true
		}
	}
	if scaledDown {
		return newRS, nil
	}
	for _, rs := range olds {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			continue
		}
		pods, err := c.pods.Pods(rs.Namespace).List(sel)
		if err != nil {
			return newRS, err
		}
		for _, p := range pods {
			if metav1.IsControlledBy(p, rs) && !podspec.IsTerminal(p.Status.Phase) {
				return newRS, nil // an old pod still exists; its deletion event brings us back
			}
		}
	}
	newRS, err := c.ensureNewRS(ctx, d, newRS, olds, replicasOf(d))
	if err != nil {
		return nil, err
	}
	return newRS, c.scale(ctx, d, newRS, replicasOf(d))
}

// cleanupHistory deletes the oldest fully scaled-down old ReplicaSets beyond revisionHistoryLimit
// (default 10).
func (c *Controller) cleanupHistory(ctx context.Context, d *appsv1.Deployment, olds []*appsv1.ReplicaSet) error {
	limit := int32(10)
	if d.Spec.RevisionHistoryLimit != nil {
		limit = *d.Spec.RevisionHistoryLimit
	}
	var idle []*appsv1.ReplicaSet
	for _, rs := range olds {
		if rsReplicas(rs) == 0 && rs.Status.Replicas == 0 && rs.DeletionTimestamp == nil {
			idle = append(idle, rs)
		}
	}
	sort.Slice(idle, func(i, j int) bool {
		ri, _ := strconv.Atoi(idle[i].Annotations[RevisionAnnotation])
		rj, _ := strconv.Atoi(idle[j].Annotations[RevisionAnnotation])
		return ri < rj
	})
	for i := 0; i < len(idle)-int(limit); i++ {
		rs := idle[i]
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		c.Log().Info("deleted old replicaset", "deployment", d.Namespace+"/"+d.Name, "replicaset", rs.Name)
	}
	return nil
}

func (c *Controller) setProgressing(ctx context.Context, d *appsv1.Deployment, reason, msg string) error {
	upd := d.DeepCopy()
	if !setCondition(&upd.Status, appsv1.DeploymentProgressing, v1.ConditionTrue, reason, msg, time.Now()) {
		return nil
	}
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}

// syncStatus writes replica counts, the revision annotation and the Available and Progressing
// conditions, and requeues to notice a passed progressDeadlineSeconds.
func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	key := d.Namespace + "/" + d.Name
	// Re-read: ensureNewRS may have written a condition since d was listed.
	cur, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now()
	want := replicasOf(cur)
	_, unavail := resolveFenceposts(cur)
	st := *cur.Status.DeepCopy()
	st.ObservedGeneration = cur.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas = 0, 0, 0, 0
	var specTotal int32
	for _, rs := range append(olds, newRS) {
		if rs == nil {
			continue
		}
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
		specTotal += rsReplicas(rs)
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(0, specTotal-st.AvailableReplicas)

	if st.AvailableReplicas >= want-unavail {
		setCondition(&st, appsv1.DeploymentAvailable, v1.ConditionTrue, ReasonMinimumReplicasAvail, "Deployment has minimum availability.", now)
	} else {
		setCondition(&st, appsv1.DeploymentAvailable, v1.ConditionFalse, ReasonMinimumReplicasUnavai, "Deployment does not have minimum availability.", now)
	}
	var requeue time.Duration
	if newRS != nil && !cur.Spec.Paused {
		oldActive := int32(0)
		for _, rs := range olds {
			oldActive += rs.Status.Replicas
		}
		complete := st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && oldActive == 0 &&
			newRS.Status.ObservedGeneration >= newRS.Generation
		prog := getCondition(&st, appsv1.DeploymentProgressing)
		progressed := cur.Status.UpdatedReplicas != st.UpdatedReplicas || cur.Status.AvailableReplicas != st.AvailableReplicas ||
			cur.Status.ReadyReplicas != st.ReadyReplicas || cur.Status.Replicas != st.Replicas
		switch {
		case complete:
			setCondition(&st, appsv1.DeploymentProgressing, v1.ConditionTrue, ReasonNewRSAvailable,
				fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name), now)
		case progressed || prog == nil || prog.Reason == ReasonNewRSAvailable:
			setCondition(&st, appsv1.DeploymentProgressing, v1.ConditionTrue, ReasonRSUpdated,
				fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name), now)
		}
		if prog = getCondition(&st, appsv1.DeploymentProgressing); !complete && prog != nil && prog.Reason != ReasonProgressDeadline &&
			cur.Spec.ProgressDeadlineSeconds != nil {
			deadline := prog.LastUpdateTime.Add(time.Duration(*cur.Spec.ProgressDeadlineSeconds) * time.Second)
			if now.After(deadline) {
				setCondition(&st, appsv1.DeploymentProgressing, v1.ConditionFalse, ReasonProgressDeadline,
					fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name), now)
			} else {
				requeue = deadline.Sub(now) + time.Second
			}
		}
	}
	if requeue > 0 {
		c.AddAfter(key, requeue)
	}
	annotationsChanged := false
	if newRS != nil && cur.Annotations[RevisionAnnotation] != newRS.Annotations[RevisionAnnotation] {
		annotationsChanged = true
		upd := cur.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[RevisionAnnotation] = newRS.Annotations[RevisionAnnotation]
		if cur, err = c.client.AppsV1().Deployments(cur.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set revision on deployment %s: %w", key, err)
		}
	}
	if !annotationsChanged && equality.Semantic.DeepEqual(cur.Status, st) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Status = st
	if _, err := c.client.AppsV1().Deployments(cur.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of deployment %s: %w", key, err)
	}
	return nil
}

func getCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a Deployment condition; lastTransitionTime moves only when the status changes,
// lastUpdateTime whenever the reason or message does. It reports whether anything changed.
func setCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status v1.ConditionStatus, reason, msg string, now time.Time) bool {
	ts := metav1.NewTime(now)
	if c := getCondition(st, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, msg, ts
		return true
	}
	st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts,
	})
	return true
}
