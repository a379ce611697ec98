package job

import (
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completionIndexEnv is the variable an Indexed Job's containers read their index from.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// newPod returns a pod of job: its template, the job-tracking finalizer and a controller
// ownerReference; for an Indexed Job (index >= 0) also the completion-index annotation and label,
// hostname "<job>-<index>", name prefix "<job>-<index>-" and JOB_COMPLETION_INDEX from the
// annotation through the downward API, in every container and init container (upstream semantics).
func newPod(job *batchv1.Job, index int) *v1.Pod {
	t := job.Spec.Template.DeepCopy()
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			Finalizers:      append(t.Finalizers, batchv1.JobTrackingFinalizer),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: t.Spec,
	}
	if index < 0 {
		return pod
	}
	ix := strconv.Itoa(index)
	pod.GenerateName = job.Name + "-" + ix + "-"
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = ix
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = ix
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = job.Name + "-" + ix
	}
	env := v1.EnvVar{Name: completionIndexEnv, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: "metadata.annotations['" + batchv1.JobCompletionIndexAnnotation + "']"}}}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].Env = append(cs[i].Env, env)
		}
	}
	return pod
}

// completionIndex returns the pod's completion index, or -1 when it has none (or a bad one).
func completionIndex(p *v1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func hasFinalizer(p *v1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == batchv1.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

// parseIndexes reads a completedIndexes string ("1,3-5,7") into a set.
func parseIndexes(s string) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b; i++ {
			out[i] = true
		}
	}
	return out
}

// formatIndexes writes a set of indexes as upstream's completedIndexes: sorted, runs as "a-b".
func formatIndexes(set map[int]bool) string {
	var ix []int
	for i := range set {
		ix = append(ix, i)
	}
	sort.Ints(ix)
	var parts []string
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ix[i]))
		} else {
			parts = append(parts, strconv.Itoa(ix[i])+"-"+strconv.Itoa(ix[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
