package job

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestMatchSuccessPolicy: succeededIndexes rules need all their indexes (or succeededCount of them),
// succeededCount rules that many indexes; the first matching rule names the message.
func TestMatchSuccessPolicy(t *testing.T) {
	done := map[int]bool{0: true, 2: true, 3: true}
	for _, tc := range []struct {
		rules []batchv1.SuccessPolicyRule
		want  string
	}{
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}, "Matched rules at index 0"},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-1")}, {SucceededIndexes: ptr.To("2-3")}}, "Matched rules at index 1"},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-2")}}, ""},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-2"), SucceededCount: ptr.To[int32](2)}}, "Matched rules at index 0"},
		{[]batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](4)}, {SucceededCount: ptr.To[int32](3)}}, "Matched rules at index 1"},
		{[]batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("7-9")}}, ""}, // beyond completions: no indexes
	} {
		msg, ok := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: tc.rules}, 5, done)
		if msg != tc.want || ok != (tc.want != "") {
			t.Errorf("rules %+v: got %q %v, want %q", tc.rules, msg, ok, tc.want)
		}
	}
	if _, ok := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](0)}}}, 5, nil); ok {
		t.Error("no succeeded index matched a rule")
	}
}

// TestJobSuccessPolicy: an Indexed Job whose rule (index 0) is met gets SuccessCriteriaMet and then
// Complete with reason SuccessPolicy, its lingering pod is deleted without counting as a failure,
// as the conformance spec "with successPolicy succeededIndexes rule" asserts.
func TestJobSuccessPolicy(t *testing.T) {
	j := testJob("sp", 5, 2, 6, batchv1.IndexedCompletion)
	j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
	h := start(t, j)
	for _, p := range h.running("sp", 2) {
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "0" {
			h.finish(p, v1.PodSucceeded)
		}
	}
	st := h.status("sp", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobSuccessCriteriaMet, reasonSuccessPolicy) || !hasCond(st, batchv1.JobComplete, reasonSuccessPolicy) {
			return fmt.Errorf("want SuccessCriteriaMet and Complete with reason SuccessPolicy")
		}
		return nil
	})
	for _, c := range st.Conditions {
		if c.Type == batchv1.JobComplete && c.Message != "Matched rules at index 0" {
			t.Errorf("Complete message %q", c.Message)
		}
	}
	if st.Succeeded != 1 || st.Failed != 0 || st.Active != 0 || st.CompletedIndexes != "0" || ptr.Deref(st.Terminating, -1) != 0 || ptr.Deref(st.Ready, -1) != 0 {
		t.Fatalf("final status %+v", st)
	}
	h.running("sp", 0)
	list, _ := h.client.CoreV1().Pods("default").List(h.ctx, metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("pods left %d, want the succeeded one", len(list.Items))
	}
}
