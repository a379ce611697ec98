// Package batch is batch/v1: jobs and cronjobs, each with /status (the Job and CronJob controllers of
// controlplane/controllers act on them). A Job created without
// spec.manualSelector gets the selector and pod template labels kube-apiserver's job strategy
// generates (batch.kubernetes.io/controller-uid=<uid>, batch.kubernetes.io/job-name=<name> and their
// legacy unprefixed forms), so the Job controller finds exactly its own pods.
package batch

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// legacy label keys kube-apiserver still adds next to the batch.kubernetes.io ones.
const (
	legacyControllerUID = "controller-uid"
	legacyJobName       = "job-name"
)

// NewStorage returns the batch/v1 endpoints keyed by resource path.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	m := map[string]rest.Storage{}
	job := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		j := o.(*batchv1.Job)
		GenerateSelector(j)
		return validation.Job(j)
	})
	job.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.JobUpdate(o.(*batchv1.Job), old.(*batchv1.Job))
	}
	main, status, err := store.New(getter, store.Spec{Resource: batchv1.Resource("jobs"), Singular: "job",
		Categories: []string{"all"}, NewFunc: func() runtime.Object { return &batchv1.Job{} },
		NewList: func() runtime.Object { return &batchv1.JobList{} }, Strategy: job,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(o.(*batchv1.Job).Status.Succeeded))}
		},
		Table: jobTable})
	if err != nil {
		return nil, err
	}
	m["jobs"], m["jobs/status"] = main, status

	cronJob := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.CronJob(o.(*batchv1.CronJob))
	})
	cronJob.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.CronJobUpdate(o.(*batchv1.CronJob), old.(*batchv1.CronJob))
	}
	main, status, err = store.New(getter, store.Spec{Resource: batchv1.Resource("cronjobs"), Singular: "cronjob",
		ShortNames: []string{"cj"}, Categories: []string{"all"},
		NewFunc: func() runtime.Object { return &batchv1.CronJob{} }, NewList: func() runtime.Object { return &batchv1.CronJobList{} },
		Strategy: cronJob, Table: cronJobTable})
	if err != nil {
		return nil, err
	}
	m["cronjobs"], m["cronjobs/status"] = main, status
	return m, nil
}

// cronJobTable is kubectl's CronJob columns: SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST SCHEDULE, AGE,
// and with -o wide CONTAINERS, IMAGES and SELECTOR (of the job template).
var cronJobTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Schedule", "the cron schedule Jobs are created on"),
		store.Column("Timezone", "the time zone the schedule is read in"),
		{Name: "Suspend", Type: "boolean", Description: "whether new runs are suspended"},
		{Name: "Active", Type: "integer", Description: "the number of Jobs running"},
		store.Column("Last Schedule", "time since the last Job was scheduled"),
	},
	AfterAge: []metav1.TableColumnDefinition{
		store.Wide("Containers", "the job template's container names"),
		store.Wide("Images", "the job template's container images"),
		store.Wide("Selector", "the job template's selector"),
	},
	Cells: func(o runtime.Object) []any {
		cj := o.(*batchv1.CronJob)
		tz, last, suspend := "<none>", "<none>", "<unset>"
		if cj.Spec.TimeZone != nil {
			tz = *cj.Spec.TimeZone
		}
		if cj.Status.LastScheduleTime != nil {
			last = store.Since(*cj.Status.LastScheduleTime)
		}
		if cj.Spec.Suspend != nil {
			suspend = "False"
			if *cj.Spec.Suspend {
				suspend = "True"
			}
		}
		var names, images []string
		for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
			names, images = append(names, c.Name), append(images, c.Image)
		}
		return []any{cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last,
			strings.Join(names, ","), strings.Join(images, ","), metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector)}
	},
}

// GenerateSelector gives a Job without spec.manualSelector its generated labels and, when it has
// none, the selector batch.kubernetes.io/controller-uid=<uid> (upstream generateSelector). It runs
// at validation, after the registry has assigned the UID.
func GenerateSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	l := j.Spec.Template.Labels
	for k, v := range map[string]string{batchv1.ControllerUidLabel: uid, legacyControllerUID: uid,
		batchv1.JobNameLabel: j.Name, legacyJobName: j.Name} {
		if _, ok := l[k]; !ok {
			l[k] = v
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}}
	}
}

var jobTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Status", "Complete, Failed, Suspended, FailureTarget, SuccessCriteriaMet or Running"),
		store.Column("Completions", "succeeded/desired completions"),
		store.Column("Duration", "time from start to completion (or now)"),
	},
	Cells: func(o runtime.Object) []any {
		j := o.(*batchv1.Job)
		completions := strconv.Itoa(int(j.Status.Succeeded)) + "/1 of " + strconv.Itoa(int(deref(j.Spec.Parallelism)))
		if j.Spec.Completions != nil {
			completions = strconv.Itoa(int(j.Status.Succeeded)) + "/" + strconv.Itoa(int(*j.Spec.Completions))
		}
		elapsed := ""
		if j.Status.StartTime != nil {
			end := metav1.Now()
			if j.Status.CompletionTime != nil {
				end = *j.Status.CompletionTime
			}
			elapsed = duration.HumanDuration(end.Sub(j.Status.StartTime.Time))
		}
		return []any{jobStatus(j), completions, elapsed}
	},
}

// jobStatus is the STATUS column as kubectl prints it for a Job.
func jobStatus(j *batchv1.Job) string {
	status := "Running"
	for _, c := range j.Status.Conditions {
		if c.Status != "True" {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "Complete"
		case batchv1.JobFailed:
			return "Failed"
		case batchv1.JobSuspended:
			status = "Suspended"
		case batchv1.JobFailureTarget:
			status = "FailureTarget"
		case batchv1.JobSuccessCriteriaMet:
			status = "SuccessCriteriaMet"
		}
	}
	return status
}

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
