// Package batch is batch/v1: jobs, with /status (cronjobs are not served until their controller
// lands: an API nothing acts on would accept objects and ignore them). A Job created without
// spec.manualSelector gets the selector and pod template labels kube-apiserver's job strategy
// generates (batch.kubernetes.io/controller-uid=<uid>, batch.kubernetes.io/job-name=<name> and their
// legacy unprefixed forms), so the Job controller finds exactly its own pods.
package batch

import (
	"strconv"

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
	return m, nil
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
