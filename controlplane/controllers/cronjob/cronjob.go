// Package cronjob is the CronJob controller (batch/v1, kube-controller-manager's cronjob controller
// v2 semantics): at each start time of spec.schedule (read in spec.timeZone) it creates the Job
// <cronjob>-<start time in minutes since the epoch> from spec.jobTemplate, controlled by the CronJob
// (so the garbage collector removes it with the CronJob) and annotated with
// batch.kubernetes.io/cronjob-scheduled-timestamp. It honours spec.suspend,
// spec.startingDeadlineSeconds (a start time missed by more is skipped with a MissSchedule event; more
// than 100 missed give a TooManyMissedTimes warning), spec.concurrencyPolicy (Allow; Forbid skips a
// start time while a Job runs; Replace deletes the running Jobs first), and the history limits
// (spec.successfulJobsHistoryLimit, spec.failedJobsHistoryLimit: the oldest finished Jobs beyond them
// are deleted); it keeps status.active, status.lastScheduleTime and status.lastSuccessfulTime. Each
// CronJob is queued again at its next start time; nothing polls.
package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
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
	"k8s.io/client-go/kubernetes/scheme"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/cronschedule"
)

var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller reconciles CronJobs. Queue keys are "namespace/name" of CronJobs.
type Controller struct {
	client   kubernetes.Interface
	cronJobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	recorder *events.Recorder
	clock    clock.PassiveClock
	*workloop.Loop
}

// New registers the controller's handlers on factory's CronJob and Job informers; clk is the time
// source for start times (nil: the real clock).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clk clock.PassiveClock, log *slog.Logger) (*Controller, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{
		client:   client,
		cronJobs: factory.Batch().V1().CronJobs().Lister(),
		jobs:     factory.Batch().V1().Jobs().Lister(),
		recorder: events.New(client, "cronjob-controller"),
		clock:    clk,
	}
	c.Loop = workloop.New("cronjob", c.reconcile, log)
	if _, err := factory.Batch().V1().CronJobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.Enqueue,
		UpdateFunc: c.cronJobUpdated,
		DeleteFunc: c.Enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.jobChanged,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*batchv1.Job), cur.(*batchv1.Job)
			if o.ResourceVersion == n.ResourceVersion {
				return
			}
			if ref := metav1.GetControllerOf(o); ref != nil && !reflect.DeepEqual(ref, metav1.GetControllerOf(n)) {
				c.jobChanged(o)
			}
			c.jobChanged(n)
		},
		DeleteFunc: c.jobChanged,
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

// cronJobUpdated queues a changed CronJob: at once, or, when its schedule or time zone changed, at its
// next start time under the new schedule (a start time of the new schedule already past is not run).
func (c *Controller) cronJobUpdated(old, cur any) {
	o, n := old.(*batchv1.CronJob), cur.(*batchv1.CronJob)
	if o.Spec.Schedule == n.Spec.Schedule && ptr.Equal(o.Spec.TimeZone, n.Spec.TimeZone) {
		c.Enqueue(cur)
		return
	}
	sched, err := cronschedule.Parse(cronschedule.Format(n.Spec.Schedule, n.Spec.TimeZone))
	if err != nil {
		c.recorder.Eventf(n, v1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", n.Spec.Schedule)
		return
	}
	c.AddAfter(workloop.KeyOf(n.Namespace, n.Name), requeueAfter(n, c.clock.Now(), sched))
}

// jobChanged queues the CronJob controlling a Job (a tombstone's included).
func (c *Controller) jobChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return
	}
	cj, err := c.cronJobs.CronJobs(job.Namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return
	}
	c.Add(workloop.KeyOf(cj.Namespace, cj.Name))
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.cronJobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its Jobs go with it through the garbage collector
	}
	if err != nil {
		return err
	}
	all, err := c.jobs.Jobs(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var jobs []*batchv1.Job
	for _, j := range all {
		if metav1.IsControlledBy(j, cached) {
			jobs = append(jobs, j)
		}
	}
	cj := cached.DeepCopy()
	c.cleanupFinished(ctx, cj, jobs)
	requeue, syncErr := c.sync(ctx, cj, jobs)
	if !equality.Semantic.DeepEqual(cached.Status, cj.Status) {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("update status of cronjob %s: %w", key, err)
		}
	}
	if requeue != nil {
		c.AddAfter(key, *requeue)
		return nil
	}
	return syncErr
}

// sync updates cj.Status.active and lastSuccessfulTime from jobs (the Jobs cj controls), then creates
// the Job of the most recent unmet start time if one is due and allowed. It returns when to look at
// cj again (nil: only on a change), changing cj.Status in place.
func (c *Controller) sync(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, error) {
	now := c.clock.Now()
	log := c.Log().With("cronjob", cj.Namespace+"/"+cj.Name)
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		active := inActive(cj, j.UID)
		done, cond := finished(j)
		switch {
		case !active && !done:
			// The cache may be behind a status this controller wrote: read the CronJob afresh.
			fresh, err := c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if inActive(fresh, j.UID) {
				fresh.DeepCopyInto(cj)
				continue
			}
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case done:
			if active {
				removeActive(cj, j.UID)
				c.recorder.Eventf(cj, v1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
			}
			if cond == batchv1.JobComplete && j.Status.CompletionTime != nil &&
				(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime
			}
		}
	}
	for _, ref := range append([]v1.ObjectReference(nil), cj.Status.Active...) {
		if children[ref.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(cj, v1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			removeActive(cj, ref.UID)
		case err != nil:
			return nil, err
		}
	}
	if cj.DeletionTimestamp != nil {
		return nil, nil
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, nil
		}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		return nil, nil
	}
	sched, err := cronschedule.Parse(cronschedule.Format(cj.Spec.Schedule, cj.Spec.TimeZone))
	if err != nil {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	_, due, kind, err := mostRecent(cj, now, sched, true)
	if err != nil {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	next := func() (*time.Duration, error) { d := requeueAfter(cj, now, sched); return &d, nil }
	if due == nil {
		return next()
	}
	if kind == manyMissed {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
		log.Info("too many missed start times", "schedule", cj.Spec.Schedule)
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && due.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", due.UTC().Format(time.RFC1123Z))
		return next()
	}
	name := jobName(cj, *due)
	if inActiveByName(cj, name) || (cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Equal(&metav1.Time{Time: *due})) {
		return next() // this start time is done already
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			c.recorder.Eventf(cj, v1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next()
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range append([]v1.ObjectReference(nil), cj.Status.Active...) {
			job, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, err
			}
			if !c.deleteJob(ctx, cj, job) {
				return nil, fmt.Errorf("could not replace job %s/%s", job.Namespace, job.Name)
			}
		}
	}
	req, err := newJob(cj, *due)
	if err != nil {
		return nil, err
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, req, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		return nil, err
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier pass whose status write was lost, or by someone else.
		if job, err = c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
		if !metav1.IsControlledBy(job, cj) || inActive(cj, job.UID) {
			return nil, nil
		}
		log.Info("job already exists", "job", name)
	case err != nil:
		c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, err
	default:
		c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
		log.Info("created job", "job", job.Name, "scheduledTime", due.UTC().Format(time.RFC3339))
	}
	ref, err := reference.GetReference(scheme.Scheme, job)
	if err != nil {
		return nil, fmt.Errorf("reference to job %s/%s: %w", job.Namespace, job.Name, err)
	}
	cj.Status.Active = append(cj.Status.Active, *ref)
	cj.Status.LastScheduleTime = &metav1.Time{Time: *due}
	return next()
}

// newJob is the Job of cj for start time t: the job template's labels, annotations and spec, the
// scheduled-timestamp annotation (t in RFC 3339, in cj's time zone) and a controller ownerReference.
func newJob(cj *batchv1.CronJob, t time.Time) (*batchv1.Job, error) {
	loc, err := time.LoadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, err
	}
	tmpl := cj.Spec.JobTemplate.DeepCopy()
	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = t.In(loc).Format(time.RFC3339)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, t),
			Namespace:       cj.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
	return job, nil
}

// cleanupFinished deletes cj's oldest finished Jobs beyond its history limits (by start time, then
// name), successful and failed ones counted apart.
func (c *Controller) cleanupFinished(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch _, cond := finished(j); cond {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	c.removeOldest(ctx, cj, succeeded, cj.Spec.SuccessfulJobsHistoryLimit)
	c.removeOldest(ctx, cj, failed, cj.Spec.FailedJobsHistoryLimit)
}

func (c *Controller) removeOldest(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, limit *int32) {
	if limit == nil || len(jobs) <= int(*limit) {
		return
	}
	sort.Slice(jobs, func(a, b int) bool {
		sa, sb := jobs[a].Status.StartTime, jobs[b].Status.StartTime
		switch {
		case sa == nil && sb != nil:
			return false
		case sa != nil && sb == nil:
			return true
		case sa.Equal(sb):
			return jobs[a].Name < jobs[b].Name
		}
		return sa.Before(sb)
	})
	for _, j := range jobs[:len(jobs)-int(*limit)] {
		c.deleteJob(ctx, cj, j)
	}
}

// deleteJob deletes a Job of cj (its pods in the background, through the garbage collector), drops it
// from status.active and records the outcome as an event; it reports success.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) bool {
	bg := metav1.DeletePropagationBackground
	if err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		c.Log().Warn("cannot delete job", "cronjob", cj.Namespace+"/"+cj.Name, "job", job.Name, "err", err)
		return false
	}
	removeActive(cj, job.UID)
	c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return true
}

// finished reports whether a Job is Complete or Failed, and which.
func finished(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == v1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func inActiveByName(cj *batchv1.CronJob, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == cj.Namespace {
			return true
		}
	}
	return false
}

func removeActive(cj *batchv1.CronJob, uid types.UID) {
	var keep []v1.ObjectReference
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			keep = append(keep, r)
		}
	}
	cj.Status.Active = keep
}
