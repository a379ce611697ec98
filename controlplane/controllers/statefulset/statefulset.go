// Package statefulset is the StatefulSet controller (apps/v1 semantics, upstream
// pkg/controller/statefulset): pods with stable names <set>-<ordinal> (from spec.ordinals.start),
// labelled statefulset.kubernetes.io/pod-name and apps.kubernetes.io/pod-index, with hostname = the
// pod's name and subdomain = spec.serviceName; OrderedReady (one pod at a time in ordinal order,
// scale-down in reverse, halting on an unhealthy pod) or Parallel pod management; RollingUpdate in
// reverse ordinal order honouring partition and maxUnavailable, or OnDelete; failed and deleted pods
// recreated under the same name; ControllerRevisions as history (status.currentRevision/updateRevision,
// the controller-revision-hash pod label, revisionHistoryLimit); status counts, observedGeneration and
// collisionCount; SuccessfulCreate/SuccessfulDelete (and FailedCreate/FailedDelete) events with
// upstream's messages. Pods named <set>-<ordinal> that match the selector and have no controller are
// adopted, owned pods that stop matching are released; the controller never touches pods another
// controller owns.
//
// volumeClaimTemplates: before a pod is created, its claims <template>-<set>-<ordinal> are created from
// the templates (labelled with the selector's labels) and the pod's volume of each template names its
// claim; claims are never deleted by the controller, but persistentVolumeClaimRetentionPolicy sets
// their owner references for the garbage collector: whenDeleted=Delete makes the set their owner,
// whenScaled=Delete makes a condemned pod the owner of its claims before the pod is deleted.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/expectations"
	"github.com/nodekit/nodekit/controlplane/controllers/history"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

var kind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Controller reconciles StatefulSets. Queue keys are "namespace/name" of StatefulSets.
type Controller struct {
	client    kubernetes.Interface
	sets      appslisters.StatefulSetLister
	revLister appslisters.ControllerRevisionLister
	pods      corelisters.PodLister
	claims    corelisters.PersistentVolumeClaimLister
	exp       *expectations.Expectations
	recorder  *events.Recorder
	now       func() time.Time
	*workloop.Loop
}

// New registers the controller's handlers on factory's StatefulSet, ControllerRevision and Pod
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:    client,
		sets:      factory.Apps().V1().StatefulSets().Lister(),
		revLister: factory.Apps().V1().ControllerRevisions().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
		claims:    factory.Core().V1().PersistentVolumeClaims().Lister(),
		exp:       expectations.New(),
		recorder:  events.New(client, "statefulset-controller"),
		now:       time.Now,
	}
	c.Loop = workloop.New("statefulset", c.reconcile, log)
	if _, err := factory.Apps().V1().StatefulSets().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Apps().V1().ControllerRevisions().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.EnqueueController(kind.Kind, obj) },
	}); err != nil {
		return nil, err
	}
	// An orphan pod named like a set's pod may be adopted: its events requeue that set.
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(c.exp.PodHandler("StatefulSet", c.Add, c.onOrphan)); err != nil {
		return nil, err
	}
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

// onOrphan requeues the set an orphan pod's name points to.
func (c *Controller) onOrphan(pod *v1.Pod, _ bool) {
	if metav1.GetControllerOf(pod) != nil {
		return
	}
	if m := podName.FindStringSubmatch(pod.Name); m != nil {
		c.Add(workloop.KeyOf(pod.Namespace, m[1]))
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	set, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || selector.Empty() {
		c.Log().Warn("invalid selector, ignoring StatefulSet", "statefulset", key, "err", err)
		return nil
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	revs, err := history.List(c.revLister, set, selector)
	if err != nil {
		return err
	}
	in, err := c.revisions(ctx, set, revs)
	if err != nil {
		return err
	}
	in.pods, in.now = pods, c.now()
	p := decide(in)
	// claims' owners follow the retention policy before a condemned pod goes
	syncErr := c.syncClaimOwners(ctx, set, pods)
	if c.exp.Satisfied(key) {
		syncErr = errors.Join(syncErr, c.apply(ctx, key, set, p))
	}
	if err := history.Cleanup(ctx, c.client, set.Spec.RevisionHistoryLimit, revs, pods, in.current.revision, in.update.revision); err != nil {
		syncErr = errors.Join(syncErr, err)
	}
	if err := c.writeStatus(ctx, set, p.status); err != nil {
		return errors.Join(syncErr, err)
	}
	if p.requeue > 0 {
		c.AddAfter(key, p.requeue)
	}
	return syncErr
}

// claimPods returns the pods set controls that match selector and are named <set>-<ordinal>, as
// upstream ClaimPods with isMemberOf: unless set is being deleted, orphans that match are adopted
// (given a controller ownerReference) and owned pods that no longer match are released (their
// ownerReference to set removed).
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*v1.Pod, error) {
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var owned []*v1.Pod
	var errs []error
	change := func(p *v1.Pod, refs []metav1.OwnerReference, what, done string) *v1.Pod {
		upd := p.DeepCopy()
		upd.OwnerReferences = refs
		out, err := c.client.CoreV1().Pods(p.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s pod %s/%s: %w", what, p.Namespace, p.Name, err))
			}
			return nil
		}
		c.Log().Info(done+" pod", "statefulset", set.Namespace+"/"+set.Name, "pod", p.Name)
		return out
	}
	for _, p := range all {
		ref := metav1.GetControllerOf(p)
		member := selector.Matches(labels.Set(p.Labels)) && ordinalOf(set, p) >= 0
		switch {
		case ref != nil && ref.UID == set.UID && member:
			owned = append(owned, p)
		case ref != nil && ref.UID == set.UID && set.DeletionTimestamp == nil:
			var keep []metav1.OwnerReference
			for _, r := range p.OwnerReferences {
				if r.UID != set.UID {
					keep = append(keep, r)
				}
			}
			change(p, keep, "release", "released")
		case ref == nil && member && set.DeletionTimestamp == nil && p.DeletionTimestamp == nil:
			if upd := change(p, append(slices.Clone(p.OwnerReferences), *metav1.NewControllerRef(set, kind)), "adopt", "adopted"); upd != nil {
				owned = append(owned, upd)
			}
		}
	}
	return owned, errors.Join(errs...)
}

// revisions ensures the update revision (the set's template) and finds the current one
// (status.currentRevision, or the update revision when that is gone or unset).
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) (*input, error) {
	upd, err := history.Ensure(ctx, c.client, history.Owner{Object: set, Kind: kind, Template: &set.Spec.Template,
		CollisionCount: set.Status.CollisionCount,
		SetCollisionCount: func(ctx context.Context, n int32) error {
			s := set.DeepCopy()
			s.Status.CollisionCount = &n
			_, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
			return err
		}}, revs)
	if err != nil {
		return nil, err
	}
	in := &input{set: set, update: revision{name: upd.Name, template: &set.Spec.Template, revision: upd}}
	in.current = in.update
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision && r.Name != upd.Name {
			t, err := history.Template(r)
			if err != nil {
				return nil, err
			}
			in.current = revision{name: r.Name, template: t, revision: r}
		}
	}
	return in, nil
}

// apply issues the plan's creations, identity relabels and deletions, recording events.
func (c *Controller) apply(ctx context.Context, key string, set *appsv1.StatefulSet, p *plan) error {
	if len(p.create)+len(p.delete) == 0 && len(p.relabel) == 0 {
		return nil
	}
	c.exp.Expect(key, len(p.create), len(p.delete))
	var errs []error
	for _, pod := range p.create {
		if err := c.createClaims(ctx, set, ordinalOf(set, pod)); err != nil {
			c.exp.Observe(key, true)
			errs = append(errs, err)
			continue
		}
		_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// a pod of that name is still terminating or not in the cache yet: the next sync sees it
			c.exp.Observe(key, true)
			continue
		}
		if err != nil {
			c.exp.Observe(key, true)
			c.recorder.Eventf(set, v1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
			errs = append(errs, err)
			continue
		}
		c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", pod.Name, set.Name)
		c.Log().Info("created pod", "statefulset", key, "pod", pod.Name, "revision", pod.Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	for _, pod := range p.relabel {
		upd := pod.DeepCopy()
		ord := ordinalOf(set, pod)
		upd.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
		upd.Labels[appsv1.PodIndexLabel] = fmt.Sprint(ord)
		if _, err := c.client.CoreV1().Pods(set.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("relabel pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	for _, d := range p.delete {
		err := c.client.CoreV1().Pods(set.Namespace).Delete(ctx, d.pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d.pod.UID}})
		if err != nil {
			c.exp.Observe(key, false)
			if !apierrors.IsNotFound(err) {
				c.recorder.Eventf(set, v1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", d.pod.Name, set.Name, err)
				errs = append(errs, err)
			}
			continue
		}
		c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", d.pod.Name, set.Name)
		c.Log().Info("deleted pod", "statefulset", key, "pod", d.pod.Name, "reason", d.reason)
	}
	return errors.Join(errs...)
}

// writeStatus completes a finished rollout and writes st when it differs from the set's status.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, st appsv1.StatefulSetStatus) error {
	completeUpdate(set, &st)
	if equality.Semantic.DeepEqual(set.Status, st) {
		return nil
	}
	upd := set.DeepCopy()
	upd.Status = st
	if _, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update status of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	return nil
}
