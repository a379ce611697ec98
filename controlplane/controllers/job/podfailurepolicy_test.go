package job

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func exitRule(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes}}
}

func failedPod(code int32, conds ...v1.PodCondition) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: v1.PodStatus{Phase: v1.PodFailed, Conditions: conds,
		InitContainerStatuses: []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}},
		ContainerStatuses:     []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}}}}
}

// TestMatchPodFailurePolicy: the first matching rule decides, with upstream's FailJob messages.
func TestMatchPodFailurePolicy(t *testing.T) {
	disruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}
	onDisruption := batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}}}
	other := exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1)
	other.OnExitCodes.ContainerName = ptr.To("other")
	for _, tc := range []struct {
		name   string
		rules  []batchv1.PodFailurePolicyRule
		pod    *v1.Pod
		action batchv1.PodFailurePolicyAction
		msg    string
	}{
		{"In", []batchv1.PodFailurePolicyRule{exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1, 2)}, failedPod(2),
			batchv1.PodFailurePolicyActionFailJob, "Container c for pod ns/p failed with exit code 2 matching FailJob rule at index 0"},
		{"first rule wins", []batchv1.PodFailurePolicyRule{exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 3),
			exitRule(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 3), exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 4)},
			failedPod(4), batchv1.PodFailurePolicyActionCount, ""},
		{"NotIn excludes", []batchv1.PodFailurePolicyRule{exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 4)}, failedPod(4), "", ""},
		{"other container", []batchv1.PodFailurePolicyRule{other}, failedPod(1), "", ""},
		{"condition", []batchv1.PodFailurePolicyRule{exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 9), onDisruption},
			failedPod(137, disruption), batchv1.PodFailurePolicyActionFailJob, "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 1"},
		{"no condition", []batchv1.PodFailurePolicyRule{onDisruption}, failedPod(137), "", ""},
	} {
		action, msg := matchPodFailurePolicy(&batchv1.PodFailurePolicy{Rules: tc.rules}, tc.pod)
		if got := ptr.Deref(action, ""); got != tc.action || (tc.msg != "" && msg != tc.msg) {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, got, msg, tc.action, tc.msg)
		}
	}
}

// exit makes pod p fail with its container c terminated with code (no finish time).
func (h *harness) exit(p v1.Pod, code int32) {
	h.t.Helper()
	h.exitAt(p, code, time.Time{})
}

// exitAt makes pod p fail with its container c terminated with code at finished.
func (h *harness) exitAt(p v1.Pod, code int32, finished time.Time) {
	h.t.Helper()
	pods := h.client.CoreV1().Pods("default")
	controllertest.Modify(h.t, func() (*v1.Pod, error) { return pods.Get(h.ctx, p.Name, metav1.GetOptions{}) },
		func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: code, FinishedAt: metav1.NewTime(finished)}}}}
		},
		func(p *v1.Pod) error { _, err := pods.UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); return err })
}

// TestJobPodFailurePolicy: an Ignore rule's failure is replaced without counting (backoffLimit 0 is
// not reached), a FailJob rule's failure fails the Job with reason PodFailurePolicy and upstream's
// message, as the conformance "pod failure policy" specs assert.
func TestJobPodFailurePolicy(t *testing.T) {
	j := testJob("pfp", 2, 1, 0, batchv1.NonIndexedCompletion)
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 42),
		exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}
	h := start(t, j)
	first := h.running("pfp", 1)[0]
	h.exit(first, 42)
	second := h.running("pfp", 1)[0]
	if second.Name == first.Name {
		t.Fatalf("ignored failure not replaced")
	}
	h.finish(second, v1.PodSucceeded)
	h.status("pfp", func(st batchv1.JobStatus) error {
		if st.Succeeded != 1 || st.Failed != 0 {
			return fmt.Errorf("want succeeded 1, failed 0 (the ignored failure uncounted)")
		}
		return nil
	})
	third := h.running("pfp", 1)[0]
	h.exit(third, 1)
	st := h.status("pfp", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailureTarget, reasonPodFailurePolicy) || !hasCond(st, batchv1.JobFailed, reasonPodFailurePolicy) {
			return fmt.Errorf("want FailureTarget and Failed with reason PodFailurePolicy")
		}
		return nil
	})
	for _, c := range st.Conditions {
		if c.Type == batchv1.JobFailed && c.Message != "Container c for pod default/"+third.Name+" failed with exit code 1 matching FailJob rule at index 1" {
			t.Errorf("Failed message %q", c.Message)
		}
	}
	if st.Failed != 1 || st.Succeeded != 1 || st.Active != 0 {
		t.Fatalf("final status %+v", st)
	}
}
