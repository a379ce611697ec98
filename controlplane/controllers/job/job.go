// Package job is the Job controller (batch/v1 semantics): it keeps up to spec.parallelism pods
// running until spec.completions pods succeed (or, without completions, one does), in NonIndexed or
// Indexed completion mode (one success per index 0..completions-1, status.completedIndexes); counts
// finished pods exactly once through the batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods; fails the Job past spec.backoffLimit failures or
// spec.activeDeadlineSeconds, writing FailureTarget then Failed (SuccessCriteriaMet then Complete on
// success) once no pod is left running, as 1.37 does; honours spec.suspend (pods deleted, Suspended
// condition, startTime reset) and spec.podReplacementPolicy; and deletes a finished Job
// spec.ttlSecondsAfterFinished after it finished (the TTL-after-finished controller's job).
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/expectations"
	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Condition reasons as upstream writes them.
const (
	reasonBackoffLimitExceeded = "BackoffLimitExceeded"
	reasonDeadlineExceeded     = "DeadlineExceeded"
	reasonCompletionsReached   = "CompletionsReached"
	reasonSuspended            = "JobSuspended"
	reasonResumed              = "JobResumed"
)

// Controller reconciles Jobs. Queue keys are "namespace/name" of Jobs.
type Controller struct {
	client   kubernetes.Interface
	jobs     batchlisters.JobLister
	pods     corelisters.PodLister
	exp      *expectations.Expectations
	recorder *events.Recorder
	clock    clock.PassiveClock
	// released holds the UIDs of pods whose finalizer this controller removed and the informer has
	// not yet shown without it, so a stale cache never counts a pod twice (upstream's
	// uidTrackingExpectations).
	released sync.Map
	*workloop.Loop
}

// New registers the controller's handlers on factory's Job and Pod informers; clk is the time source
// for deadlines and TTLs (nil: the real clock).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clk clock.PassiveClock, log *slog.Logger) (*Controller, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{
		client:   client,
		jobs:     factory.Batch().V1().Jobs().Lister(),
		pods:     factory.Core().V1().Pods().Lister(),
		exp:      expectations.New(),
		recorder: events.New(client, "job-controller"),
		clock:    clk,
	}
	c.Loop = workloop.New("job", c.reconcile, log)
	if _, err := factory.Batch().V1().Jobs().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(c.exp.PodHandler("Job", c.Add, c.seenPod)); err != nil {
		return nil, err
	}
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

// seenPod forgets a pod's released job-tracking finalizer once the pod is deleted or no longer carries
// the finalizer.
func (c *Controller) seenPod(pod *v1.Pod, deleted bool) {
	if deleted || !hasFinalizer(pod) {
		c.released.Delete(pod.UID)
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	job, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return c.releaseOrphans(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	// Expectations are read before the pods are listed, as upstream's syncJob does: a pod observed after
	// the listing would otherwise count as satisfied yet be missing from the list.
	satisfied := c.exp.Satisfied(key)
	pods, err := c.ownedPods(job)
	if err != nil {
		return err
	}
	if finished(job) {
		return c.afterFinished(ctx, job, pods)
	}
	if job.DeletionTimestamp != nil {
		return c.removeFinalizers(ctx, pods)
	}
	// Counting needs the Job's latest status, not the cache's: read it from the API server.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.sync(ctx, key, fresh, pods, satisfied)
}

// ownedPods lists the pods job controls (matching its selector).
func (c *Controller) ownedPods(job *batchv1.Job) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, nil
	}
	all, err := c.pods.Pods(job.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []*v1.Pod
	for _, p := range all {
		if metav1.IsControlledBy(p, job) {
			out = append(out, p)
		}
	}
	return out, nil
}

// releaseOrphans removes the tracking finalizer from the pods of a Job that is gone, so they can be
// garbage collected.
func (c *Controller) releaseOrphans(ctx context.Context, ns, name string) error {
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var orphans []*v1.Pod
	for _, p := range all {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" && ref.Name == name && hasFinalizer(p) {
			orphans = append(orphans, p)
		}
	}
	return c.removeFinalizers(ctx, orphans)
}

// removeFinalizerPatch drops the job-tracking finalizer and nothing else (upstream's patch).
var removeFinalizerPatch = []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + batchv1.JobTrackingFinalizer + `"]}}`)

func (c *Controller) removeFinalizers(ctx context.Context, pods []*v1.Pod) error {
	var errs []error
	for _, p := range pods {
		if !hasFinalizer(p) {
			continue
		}
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, removeFinalizerPatch,
			metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		c.released.Store(p.UID, true)
	}
	return errors.Join(errs...)
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == t && job.Status.Conditions[i].Status == v1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func finished(job *batchv1.Job) bool {
	return condition(job, batchv1.JobComplete) != nil || condition(job, batchv1.JobFailed) != nil
}

// setCondition sets condition t to status (reason, message), keeping lastTransitionTime when the
// status does not change.
func setCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status v1.ConditionStatus, reason, msg string, now time.Time) {
	ts := metav1.NewTime(now)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, msg, ts
		return
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg,
		LastProbeTime: ts, LastTransitionTime: ts})
}

// afterFinished releases a finished Job's pods and applies ttlSecondsAfterFinished.
func (c *Controller) afterFinished(ctx context.Context, job *batchv1.Job, pods []*v1.Pod) error {
	if err := c.removeFinalizers(ctx, pods); err != nil {
		return err
	}
	if job.Spec.TTLSecondsAfterFinished == nil || job.DeletionTimestamp != nil {
		return nil
	}
	cond := condition(job, batchv1.JobComplete)
	if cond == nil {
		cond = condition(job, batchv1.JobFailed)
	}
	expire := cond.LastTransitionTime.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	if left := expire.Sub(c.clock.Now()); left > 0 {
		c.AddAfter(workloop.KeyOf(job.Namespace, job.Name), left)
		return nil
	}
	fg := metav1.DeletePropagationForeground
	err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &fg,
		Preconditions: &metav1.Preconditions{UID: &job.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.Log().Info("deleted finished job after its TTL", "job", job.Namespace+"/"+job.Name)
	return nil
}

// podFailed reports whether a pod counts as a failure: phase Failed, or deleted before it succeeded.
func podFailed(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed || (p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded)
}

// sync runs one pass over an unfinished Job: count finished pods, decide success or failure, then
// create or delete pods, and write status. satisfied says every pod creation and deletion asked for
// before pods was listed has been observed.
func (c *Controller) sync(ctx context.Context, key string, job *batchv1.Job, pods []*v1.Pod, satisfied bool) error {
	now := c.clock.Now()
	st := &job.Status
	old := job.Status.DeepCopy()
	indexed := job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
	if err := c.track(ctx, job, pods); err != nil {
		return err
	}
	var active []*v1.Pod
	var terminating int32
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			active = append(active, p)
		case p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			terminating++
		}
	}
	suspended := job.Spec.Suspend != nil && *job.Spec.Suspend
	completions := job.Spec.Completions
	// Success criteria.
	succeededEnough := false
	if indexed {
		succeededEnough = int32(len(parseIndexes(st.CompletedIndexes))) >= *completions
	} else if completions != nil {
		succeededEnough = st.Succeeded >= *completions
	} else {
		succeededEnough = st.Succeeded > 0
	}
	var requeue time.Duration
	switch {
	case condition(job, batchv1.JobFailureTarget) != nil || condition(job, batchv1.JobSuccessCriteriaMet) != nil:
	case succeededEnough:
		setCondition(st, batchv1.JobSuccessCriteriaMet, v1.ConditionTrue, reasonCompletionsReached, "Reached expected number of succeeded pods", now)
	case st.Failed > *job.Spec.BackoffLimit:
		setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, reasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
	case !suspended && st.StartTime != nil && job.Spec.ActiveDeadlineSeconds != nil:
		deadline := st.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
		if !now.Before(deadline) {
			setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, reasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		} else {
			requeue = deadline.Sub(now)
		}
	}
	ending := condition(job, batchv1.JobFailureTarget) != nil || condition(job, batchv1.JobSuccessCriteriaMet) != nil
	var manageErr error
	switch {
	case ending || suspended:
		// Pods are deleted only once every creation this controller asked for has been observed: a pod
		// still in flight would otherwise outlive the Job's terminal condition.
		if satisfied {
			manageErr = c.deletePods(ctx, key, job, active)
			active = nil
		}
	case satisfied:
		if st.StartTime == nil {
			st.StartTime = &metav1.Time{Time: now}
			if job.Spec.ActiveDeadlineSeconds != nil {
				requeue = time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second
			}
		}
		manageErr = c.manage(ctx, key, job, active, terminating, indexed)
	}
	// Suspension.
	if suspended && !ending {
		if cond := condition(job, batchv1.JobSuspended); cond == nil {
			setCondition(st, batchv1.JobSuspended, v1.ConditionTrue, reasonSuspended, "Job suspended", now)
			st.StartTime = nil // the active deadline restarts on resume
			c.recorder.Event(job, v1.EventTypeNormal, "Suspended", "Job suspended")
		}
	} else if !suspended {
		for _, cond := range st.Conditions {
			if cond.Type == batchv1.JobSuspended && cond.Status == v1.ConditionTrue {
				setCondition(st, batchv1.JobSuspended, v1.ConditionFalse, reasonResumed, "Job resumed", now)
				c.recorder.Event(job, v1.EventTypeNormal, "Resumed", "Job resumed")
			}
		}
	}
	// The terminal condition follows once no pod is left running, none is still being created (its
	// observation requeues the Job) and every finished one is counted.
	if ending && satisfied && len(active) == 0 && terminating == 0 && len(st.UncountedTerminatedPods.Succeeded)+len(st.UncountedTerminatedPods.Failed) == 0 {
		if ft := condition(job, batchv1.JobFailureTarget); ft != nil {
			setCondition(st, batchv1.JobFailed, v1.ConditionTrue, ft.Reason, ft.Message, now)
			c.recorder.Event(job, v1.EventTypeWarning, ft.Reason, ft.Message)
		} else {
			setCondition(st, batchv1.JobComplete, v1.ConditionTrue, "", "", now)
			st.CompletionTime = &metav1.Time{Time: now}
			c.recorder.Event(job, v1.EventTypeNormal, "Completed", "Job completed")
		}
	}
	if !ending && !suspended {
		st.Active = int32(len(active))
	} else {
		st.Active = 0
	}
	var ready int32
	for _, p := range active {
		if podutil.IsReady(p) {
			ready++
		}
	}
	st.Ready = &ready
	st.Terminating = &terminating
	if !equality.Semantic.DeepEqual(old, st) {
		if _, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(manageErr, fmt.Errorf("update status of job %s/%s: %w", job.Namespace, job.Name, err))
		}
	}
	if requeue > 0 {
		c.AddAfter(key, requeue)
	}
	return manageErr
}

// track counts finished pods exactly once: their UIDs go to status.uncountedTerminatedPods (written
// first), then their finalizer is removed, then they move into succeeded/failed (and, Indexed,
// completedIndexes). job.Status is updated in place and written when it changed.
func (c *Controller) track(ctx context.Context, job *batchv1.Job, pods []*v1.Pod) error {
	st := &job.Status
	if st.UncountedTerminatedPods == nil {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	u := st.UncountedTerminatedPods
	known := map[types.UID]bool{}
	for _, id := range append(append([]types.UID{}, u.Succeeded...), u.Failed...) {
		known[id] = true
	}
	// Pods the controller itself deletes on suspension or once the outcome is decided are released
	// without counting as failures.
	quiet := (job.Spec.Suspend != nil && *job.Spec.Suspend) || condition(job, batchv1.JobFailureTarget) != nil ||
		condition(job, batchv1.JobSuccessCriteriaMet) != nil
	byUID := map[types.UID]*v1.Pod{}
	added := false
	var toRelease []*v1.Pod
	for _, p := range pods {
		byUID[p.UID] = p
		if _, gone := c.released.Load(p.UID); !hasFinalizer(p) || known[p.UID] || gone {
			continue
		}
		switch {
		case quiet && p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			toRelease = append(toRelease, p)
		case p.Status.Phase == v1.PodSucceeded:
			u.Succeeded = append(u.Succeeded, p.UID)
			added = true
		case podFailed(p):
			u.Failed = append(u.Failed, p.UID)
			added = true
		}
	}
	if !added && len(u.Succeeded)+len(u.Failed) == 0 {
		return c.removeFinalizers(ctx, toRelease)
	}
	if added {
		upd, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		job.ResourceVersion = upd.ResourceVersion
	}
	for _, id := range append(append([]types.UID{}, u.Succeeded...), u.Failed...) {
		if p := byUID[id]; p != nil {
			toRelease = append(toRelease, p)
		}
	}
	if err := c.removeFinalizers(ctx, toRelease); err != nil {
		return err
	}
	done := parseIndexes(st.CompletedIndexes)
	for _, id := range u.Succeeded {
		if p := byUID[id]; p != nil {
			if ix := completionIndex(p); ix >= 0 {
				if job.Spec.Completions != nil && int32(ix) < *job.Spec.Completions && !done[ix] {
					done[ix] = true
					st.Succeeded++
				}
				continue
			}
		}
		st.Succeeded++
	}
	if len(done) > 0 {
		st.CompletedIndexes = formatIndexes(done)
	}
	st.Failed += int32(len(u.Failed))
	u.Succeeded, u.Failed = nil, nil
	upd, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	job.ResourceVersion = upd.ResourceVersion
	return nil
}

// manage creates pods up to the parallelism the remaining completions need, or deletes the newest
// extras. With podReplacementPolicy Failed no replacement starts while a pod is still terminating.
func (c *Controller) manage(ctx context.Context, key string, job *batchv1.Job, active []*v1.Pod, terminating int32, indexed bool) error {
	parallelism := *job.Spec.Parallelism
	if terminating > 0 && job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed {
		return nil
	}
	var indexes []int // for Indexed: the indexes to create
	want := parallelism
	if indexed {
		done := parseIndexes(job.Status.CompletedIndexes)
		running := map[int]bool{}
		var dup []*v1.Pod
		for _, p := range active {
			ix := completionIndex(p)
			if ix < 0 || int32(ix) >= *job.Spec.Completions || running[ix] || done[ix] {
				dup = append(dup, p)
				continue
			}
			running[ix] = true
		}
		if len(dup) > 0 {
			return c.deletePods(ctx, key, job, dup)
		}
		for i := 0; i < int(*job.Spec.Completions) && int32(len(running)+len(indexes)) < parallelism; i++ {
			if !done[i] && !running[i] {
				indexes = append(indexes, i)
			}
		}
		want = int32(len(running) + len(indexes))
	} else if job.Spec.Completions != nil {
		want = min(parallelism, max(0, *job.Spec.Completions-job.Status.Succeeded))
	} else if job.Status.Succeeded > 0 {
		want = int32(len(active)) // one success: no new pods, the running ones may finish
	}
	n := int(want) - len(active)
	switch {
	case n > 0:
		c.exp.Expect(key, n, 0)
		var errs []error
		for i := range n {
			ix := -1
			if indexed {
				ix = indexes[i]
			}
			created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, newPod(job, ix), metav1.CreateOptions{})
			if err != nil {
				c.exp.Observe(key, true)
				c.recorder.Eventf(job, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				errs = append(errs, err)
				continue
			}
			c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
		}
		return errors.Join(errs...)
	case n < 0:
		extra := append([]*v1.Pod(nil), active...)
		sort.Slice(extra, func(i, j int) bool { return extra[i].CreationTimestamp.After(extra[j].CreationTimestamp.Time) })
		return c.deletePods(ctx, key, job, extra[:-n])
	}
	return nil
}

func (c *Controller) deletePods(ctx context.Context, key string, job *batchv1.Job, pods []*v1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	c.exp.Expect(key, 0, len(pods))
	var errs []error
	for _, p := range pods {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil {
			c.exp.Observe(key, false)
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	}
	return errors.Join(errs...)
}
