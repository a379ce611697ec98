// Package job is the Job controller (batch/v1 semantics): it keeps up to spec.parallelism pods
// running until spec.completions pods succeed (or, without completions, one does), in NonIndexed or
// Indexed completion mode (one success per index 0..completions-1, status.completedIndexes); counts
// finished pods exactly once through the batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods; fails the Job past spec.backoffLimit failures or
// spec.activeDeadlineSeconds, writing FailureTarget then Failed (SuccessCriteriaMet then Complete on
// success) once no pod is left running, as 1.37 does; for Indexed Jobs with spec.backoffLimitPerIndex
// counts failures per index (pod annotations batch.kubernetes.io/job-index-failure-count and
// job-index-ignored-failure-count), backs each index off, records status.failedIndexes, never
// recreates a failed index and fails the Job with FailedIndexes (or, past spec.maxFailedIndexes, at
// once with MaxFailedIndexesExceeded); applies spec.podFailurePolicy (FailJob, FailIndex, Ignore,
// Count) and spec.successPolicy; honours spec.suspend (pods deleted, Suspended
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
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/controllerref"
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
// the finalizer, and wakes the Jobs that may adopt a live orphan.
func (c *Controller) seenPod(pod *v1.Pod, deleted bool) {
	if deleted || !hasFinalizer(pod) {
		c.released.Delete(pod.UID)
	}
	if !deleted {
		c.seenOrphan(pod)
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
	pods, err := c.ownedPods(ctx, job)
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

// ownedPods returns the pods job controls after adopting the live orphans of its namespace that match
// its selector (with the job-tracking finalizer, which the returned copies carry too) and releasing
// the owned pods that stopped matching (their finalizer removed with the ownerReference), as
// upstream's getPodsForJob; adoption first rechecks that job is not being deleted.
func (c *Controller) ownedPods(ctx context.Context, job *batchv1.Job) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, nil
	}
	all, err := c.pods.Pods(job.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := controllerref.Claim(ctx, &controllerref.Manager{
		Owner: job, Kind: batchv1.SchemeGroupVersion.WithKind("Job"), Selector: sel, Log: c.Log(),
		Finalizers: []string{batchv1.JobTrackingFinalizer},
		Patch:      controllerref.PodPatch(c.client, job.Namespace),
		CanAdopt: controllerref.RecheckDeletion(job, func(ctx context.Context) (metav1.Object, error) {
			return c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		}),
	}, all)
	for i, p := range pods {
		if !metav1.IsControlledBy(p, job) && !hasFinalizer(p) { // adopted just now
			pods[i] = p.DeepCopy()
			pods[i].Finalizers = append(pods[i].Finalizers, batchv1.JobTrackingFinalizer)
		}
	}
	return pods, err
}

// seenOrphan enqueues every Job of an orphan pod's namespace whose selector matches it, so that one of
// them adopts it (upstream getPodJobs on add and update).
func (c *Controller) seenOrphan(pod *v1.Pod) {
	if pod.DeletionTimestamp != nil || metav1.GetControllerOf(pod) != nil {
		return
	}
	jobs, err := c.jobs.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, job := range controllerref.Selecting(jobs, func(j *batchv1.Job) *metav1.LabelSelector { return j.Spec.Selector }, pod.Labels) {
		c.Add(workloop.KeyOf(job.Namespace, job.Name))
	}
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

// podFailed reports whether a pod counts as a failure: phase Failed, or deleted before it succeeded —
// unless the Job has a podFailurePolicy, whose rules need the pod's final state: then only phase
// Failed, as upstream.
func podFailed(job *batchv1.Job, p *v1.Pod) bool {
	if p.Status.Phase == v1.PodFailed || job.Spec.PodFailurePolicy != nil {
		return p.Status.Phase == v1.PodFailed
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded
}

// sync runs one pass over an unfinished Job: count finished pods, decide success or failure, then
// create or delete pods, and write status. satisfied says every pod creation and deletion asked for
// before pods was listed has been observed.
func (c *Controller) sync(ctx context.Context, key string, job *batchv1.Job, pods []*v1.Pod, satisfied bool) error {
	now := c.clock.Now()
	st := &job.Status
	old := job.Status.DeepCopy()
	indexed := job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
	waiting, err := c.track(ctx, job, pods)
	if err != nil {
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
	perIndex := hasBackoffLimitPerIndex(job)
	var failedIx map[int]bool
	if perIndex {
		if st.FailedIndexes == nil {
			st.FailedIndexes = ptr.To("")
		}
		failedIx = parseIndexes(*st.FailedIndexes)
	}
	policyMsg, policyMet := "", false
	if indexed {
		policyMsg, policyMet = matchSuccessPolicy(job.Spec.SuccessPolicy, *completions, parseIndexes(st.CompletedIndexes))
	}
	var requeue time.Duration
	switch {
	case condition(job, batchv1.JobFailureTarget) != nil || condition(job, batchv1.JobSuccessCriteriaMet) != nil:
	case policyMet:
		// The lingering pods are then deleted (ending, below) and not counted as failures.
		setCondition(st, batchv1.JobSuccessCriteriaMet, v1.ConditionTrue, reasonSuccessPolicy, policyMsg, now)
	case succeededEnough:
		setCondition(st, batchv1.JobSuccessCriteriaMet, v1.ConditionTrue, reasonCompletionsReached, "Reached expected number of succeeded pods", now)
	case st.Failed > *job.Spec.BackoffLimit:
		setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, reasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
	case perIndex && job.Spec.MaxFailedIndexes != nil && int32(len(failedIx)) > *job.Spec.MaxFailedIndexes:
		setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, batchv1.JobReasonMaxFailedIndexesExceeded,
			"Job has exceeded the specified maximal number of failed indexes", now)
	case perIndex && len(failedIx) > 0 && int32(len(failedIx)+len(parseIndexes(st.CompletedIndexes))) >= *completions:
		setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
	case !suspended && st.StartTime != nil && job.Spec.ActiveDeadlineSeconds != nil:
		deadline := st.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
		if !now.Before(deadline) {
			setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, reasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		} else {
			requeue = deadline.Sub(now)
		}
	}
	ending := condition(job, batchv1.JobFailureTarget) != nil || condition(job, batchv1.JobSuccessCriteriaMet) != nil
	if ending && len(waiting) > 0 {
		// The failures whose counting waited for their index's replacement (delayedRelease) count now.
		if _, err := c.track(ctx, job, waiting); err != nil {
			return err
		}
	}
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
		manageErr = c.manage(ctx, key, job, pods, active, terminating, indexed)
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
		} else if sc := condition(job, batchv1.JobSuccessCriteriaMet); sc != nil {
			// Complete carries the reason and message of SuccessCriteriaMet, as upstream's
			// (CompletionsReached, or SuccessPolicy): clients wait for Complete with that reason.
			setCondition(st, batchv1.JobComplete, v1.ConditionTrue, sc.Reason, sc.Message, now)
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
// completedIndexes). job.Status is updated in place and written when it changed. It returns the failed
// pods left uncounted because their index awaits its replacement (see delayedRelease).
func (c *Controller) track(ctx context.Context, job *batchv1.Job, pods []*v1.Pod) ([]*v1.Pod, error) {
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
	var toRelease, waiting []*v1.Pod
	delayed := delayedRelease(job, pods)
	for _, p := range pods {
		byUID[p.UID] = p
		if _, gone := c.released.Load(p.UID); !hasFinalizer(p) || known[p.UID] || gone {
			continue
		}
		if delayed[p.UID] && !quiet {
			waiting = append(waiting, p)
			continue
		}
		switch {
		case quiet && p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			toRelease = append(toRelease, p)
		case p.Status.Phase == v1.PodSucceeded:
			u.Succeeded = append(u.Succeeded, p.UID)
			added = true
		case podFailed(job, p):
			// spec.podFailurePolicy: Ignore releases the pod uncounted (it is replaced), FailJob
			// counts it and fails the Job, FailIndex counts it and fails its index (below), Count
			// (or no matching rule) counts it.
			action, msg := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
			switch {
			case action != nil && *action == batchv1.PodFailurePolicyActionIgnore:
				toRelease = append(toRelease, p)
				continue
			case action != nil && *action == batchv1.PodFailurePolicyActionFailJob && condition(job, batchv1.JobFailureTarget) == nil:
				setCondition(st, batchv1.JobFailureTarget, v1.ConditionTrue, reasonPodFailurePolicy, msg, c.clock.Now())
			}
			u.Failed = append(u.Failed, p.UID)
			added = true
		}
	}
	if !added && len(u.Succeeded)+len(u.Failed) == 0 {
		return waiting, c.removeFinalizers(ctx, toRelease)
	}
	if added {
		upd, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		job.ResourceVersion = upd.ResourceVersion
	}
	for _, id := range append(append([]types.UID{}, u.Succeeded...), u.Failed...) {
		if p := byUID[id]; p != nil {
			toRelease = append(toRelease, p)
		}
	}
	if err := c.removeFinalizers(ctx, toRelease); err != nil {
		return nil, err
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
	if hasBackoffLimitPerIndex(job) {
		// backoffLimitPerIndex: a counted failure fails its index for good past the limit or on a
		// FailIndex rule (status.failedIndexes; the index is not recreated).
		failedIx := parseIndexes(ptr.Deref(st.FailedIndexes, ""))
		for _, id := range u.Failed {
			if p := byUID[id]; p != nil {
				if ix := completionIndex(p); ix >= 0 && int32(ix) < *job.Spec.Completions && !done[ix] && indexFailed(job, p) {
					failedIx[ix] = true
				}
			}
		}
		st.FailedIndexes = ptr.To(formatIndexes(failedIx))
	}
	st.Failed += int32(len(u.Failed))
	u.Succeeded, u.Failed = nil, nil
	upd, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	job.ResourceVersion = upd.ResourceVersion
	return waiting, nil
}

// manage creates pods up to the parallelism the remaining completions need, or deletes the newest
// extras. With podReplacementPolicy Failed no replacement starts while a pod is still terminating.
// With backoffLimitPerIndex, failed indexes are not recreated, and an index's replacement carries its
// failure counts and waits out its backoff (the Job is requeued for the earliest). pods are all the
// Job's pods, active the running ones.
func (c *Controller) manage(ctx context.Context, key string, job *batchv1.Job, pods, active []*v1.Pod, terminating int32, indexed bool) error {
	parallelism := *job.Spec.Parallelism
	if terminating > 0 && job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed {
		return nil
	}
	var indexes []int // for Indexed: the indexes to create
	var lastFailed map[int]*v1.Pod
	want := parallelism
	if indexed {
		done := parseIndexes(job.Status.CompletedIndexes)
		for ix := range parseIndexes(ptr.Deref(job.Status.FailedIndexes, "")) {
			done[ix] = true // a failed index is finished too
		}
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
		if hasBackoffLimitPerIndex(job) {
			lastFailed = lastFailedPerIndex(job, pods, func(ix int) bool { return done[ix] || running[ix] })
			indexes = c.pastBackoff(key, indexes, lastFailed)
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
			pod := newPod(job, ix)
			if indexed && hasBackoffLimitPerIndex(job) {
				setIndexFailureCounts(job, pod, lastFailed[ix])
			}
			created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
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

// pastBackoff returns the indexes whose backoff (after their last failed pod, see indexBackoff) is
// over, and requeues key for the earliest end of the others'.
func (c *Controller) pastBackoff(key string, indexes []int, lastFailed map[int]*v1.Pod) []int {
	now := c.clock.Now()
	var ready []int
	var wait time.Duration
	for _, ix := range indexes {
		if d := indexBackoff(now, lastFailed[ix]); d == 0 {
			ready = append(ready, ix)
		} else if wait == 0 || d < wait {
			wait = d
		}
	}
	if wait > 0 {
		c.AddAfter(key, wait)
	}
	return ready
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
