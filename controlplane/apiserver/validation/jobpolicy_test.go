package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// jobSpecCase is a bad Job spec and the one cause JobSpec must report for it.
type jobSpecCase struct {
	name   string
	spec   *batchv1.JobSpec
	path   string
	typ    field.ErrorType
	detail string
}

func checkJobSpecs(t *testing.T, cases []jobSpecCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := JobSpec(tc.spec, specPath)
			if !hasCause(errs, tc.path, tc.typ) {
				t.Fatalf("want %s on %s, got %v", tc.typ, tc.path, errs)
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.detail) {
				t.Fatalf("errors %v lack %q", errs, tc.detail)
			}
		})
	}
}

// TestJobSuccessPolicyValidation: a successPolicy of an Indexed Job is accepted; each bad rule is one
// cause naming its field with upstream's message.
func TestJobSuccessPolicyValidation(t *testing.T) {
	spec := func(rules ...batchv1.SuccessPolicyRule) *batchv1.JobSpec {
		s := validCronJob().Spec.JobTemplate.Spec
		s.Completions, s.CompletionMode = ptr.To[int32](5), ptr.To(batchv1.IndexedCompletion)
		s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: rules}
		return &s
	}
	good := spec(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0,2-4")}, batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](5)},
		batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("1-3"), SucceededCount: ptr.To[int32](2)})
	if errs := JobSpec(good, specPath); len(errs) != 0 {
		t.Fatalf("valid successPolicy: %v", errs)
	}
	nonIndexed := spec(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](1)})
	nonIndexed.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	rule := "spec.successPolicy.rules[0]"
	cases := []jobSpecCase{
		{"non-indexed", nonIndexed, "spec.successPolicy", field.ErrorTypeInvalid, "requires indexed completion mode"},
		{"no rules", spec(), "spec.successPolicy.rules", field.ErrorTypeRequired, ""},
		{"empty rule", spec(batchv1.SuccessPolicyRule{}), rule, field.ErrorTypeRequired, "at least one of succeededCount or succeededIndexes"},
		{"index too large", spec(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("1,5")}), rule + ".succeededIndexes", field.ErrorTypeInvalid, `too large index: "5"`},
		{"decreasing", spec(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("3,1")}), rule + ".succeededIndexes", field.ErrorTypeInvalid, "non-increasing order, previous: 3, current: 1"},
		{"not a number", spec(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("a-2")}), rule + ".succeededIndexes", field.ErrorTypeInvalid, `cannot convert string to integer for index: "a"`},
		{"count above completions", spec(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](6)}), rule + ".succeededCount", field.ErrorTypeInvalid, "(the number of specified completions)"},
		{"count above indexes", spec(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0-1"), SucceededCount: ptr.To[int32](3)}), rule + ".succeededCount", field.ErrorTypeInvalid, "must be less than or equal to 2"},
		{"negative count", spec(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](-1)}), rule + ".succeededCount", field.ErrorTypeInvalid, ""},
	}
	checkJobSpecs(t, cases)
}

// TestJobPodFailurePolicyValidation: a podFailurePolicy with FailJob, Ignore and Count rules is
// accepted; each bad rule is one cause naming its field with upstream's message.
func TestJobPodFailurePolicyValidation(t *testing.T) {
	spec := func(rules ...batchv1.PodFailurePolicyRule) *batchv1.JobSpec {
		s := validCronJob().Spec.JobTemplate.Spec
		s.Template.Spec.RestartPolicy = "Never"
		s.PodReplacementPolicy = ptr.To(batchv1.Failed)
		s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules}
		return &s
	}
	codes := func(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}}
	}
	good := spec(codes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1, 2),
		codes(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0),
		batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget", Status: "True"}}})
	if errs := JobSpec(good, specPath); len(errs) != 0 {
		t.Fatalf("valid podFailurePolicy: %v", errs)
	}
	onFailure := spec(codes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1))
	onFailure.Template.Spec.RestartPolicy = "OnFailure"
	otherContainer := spec(codes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1))
	otherContainer.PodFailurePolicy.Rules[0].OnExitCodes.ContainerName = ptr.To("nope")
	rule := "spec.podFailurePolicy.rules[0]"
	cases := []jobSpecCase{
		{"restartPolicy OnFailure", onFailure, "spec.template.spec.restartPolicy", field.ErrorTypeInvalid, `only "Never" is supported when podFailurePolicy is specified`},
		{"no action", spec(codes("", batchv1.PodFailurePolicyOnExitCodesOpIn, 1)), rule + ".action", field.ErrorTypeRequired, ""},
		{"FailIndex without backoffLimitPerIndex", spec(codes(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, 1)), rule + ".action", field.ErrorTypeInvalid, "requires the backoffLimitPerIndex to be set"},
		{"bad operator", spec(codes(batchv1.PodFailurePolicyActionIgnore, "Maybe", 1)), rule + ".onExitCodes.operator", field.ErrorTypeNotSupported, ""},
		{"zero with In", spec(codes(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 0)), rule + ".onExitCodes.values[0]", field.ErrorTypeInvalid, "must not be 0 for the In operator"},
		{"unordered", spec(codes(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 3, 2)), rule + ".onExitCodes.values", field.ErrorTypeInvalid, "must be ordered"},
		{"no values", spec(codes(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn)), rule + ".onExitCodes.values", field.ErrorTypeInvalid, "at least one value is required"},
		{"unknown container", otherContainer, rule + ".onExitCodes.containerName", field.ErrorTypeInvalid, "must be one of the container or initContainer names"},
		{"neither", spec(batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore}), rule, field.ErrorTypeInvalid, "specifying one of OnExitCodes and OnPodConditions is required"},
		{"bad status", spec(batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget", Status: "Yes"}}}), rule + ".onPodConditions[0].status", field.ErrorTypeNotSupported, ""},
	}
	checkJobSpecs(t, cases)
}

// TestJobBackoffLimitPerIndexValidation: backoffLimitPerIndex and maxFailedIndexes of an Indexed Job
// (with a FailIndex rule) are accepted; each bad use is one cause with upstream's message, and
// backoffLimitPerIndex is immutable while maxFailedIndexes may change.
func TestJobBackoffLimitPerIndexValidation(t *testing.T) {
	spec := func(limit, maxFailed *int32, mode batchv1.CompletionMode) *batchv1.JobSpec {
		s := validCronJob().Spec.JobTemplate.Spec
		s.CompletionMode = ptr.To(mode)
		s.Completions = ptr.To[int32](4)
		s.BackoffLimitPerIndex, s.MaxFailedIndexes = limit, maxFailed
		return &s
	}
	good := spec(ptr.To[int32](1), ptr.To[int32](4), batchv1.IndexedCompletion)
	good.Template.Spec.RestartPolicy = "Never"
	good.PodReplacementPolicy = ptr.To(batchv1.Failed)
	good.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailIndex,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}}}}
	if errs := JobSpec(good, specPath); len(errs) != 0 {
		t.Fatalf("valid backoffLimitPerIndex with FailIndex: %v", errs)
	}
	many := spec(ptr.To[int32](1), ptr.To[int32](100_001), batchv1.IndexedCompletion)
	many.Completions = ptr.To[int32](200_000)
	checkJobSpecs(t, []jobSpecCase{
		{"NonIndexed", spec(ptr.To[int32](1), nil, batchv1.NonIndexedCompletion), "spec.backoffLimitPerIndex", field.ErrorTypeInvalid, "requires indexed completion mode"},
		{"maxFailedIndexes NonIndexed", spec(ptr.To[int32](1), ptr.To[int32](1), batchv1.NonIndexedCompletion), "spec.maxFailedIndexes", field.ErrorTypeInvalid, "requires indexed completion mode"},
		{"maxFailedIndexes alone", spec(nil, ptr.To[int32](1), batchv1.IndexedCompletion), "spec.backoffLimitPerIndex", field.ErrorTypeRequired, "when maxFailedIndexes is specified"},
		{"above completions", spec(ptr.To[int32](1), ptr.To[int32](5), batchv1.IndexedCompletion), "spec.maxFailedIndexes", field.ErrorTypeInvalid, "must be less than or equal to completions"},
		{"above the limit", many, "spec.maxFailedIndexes", field.ErrorTypeInvalid, "must be less than or equal to 100000"},
		{"negative limit", spec(ptr.To[int32](-1), nil, batchv1.IndexedCompletion), "spec.backoffLimitPerIndex", field.ErrorTypeInvalid, "must be greater than or equal to 0"},
		{"negative maxFailedIndexes", spec(ptr.To[int32](1), ptr.To[int32](-1), batchv1.IndexedCompletion), "spec.maxFailedIndexes", field.ErrorTypeInvalid, "must be greater than or equal to 0"},
	})
	old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u"}, Spec: *good.DeepCopy()}
	old.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u"}}
	old.Spec.Template.Labels = map[string]string{batchv1.ControllerUidLabel: "u"}
	if errs := Job(old); len(errs) != 0 {
		t.Fatalf("valid job: %v", errs)
	}
	changed := old.DeepCopy()
	changed.Spec.MaxFailedIndexes = ptr.To[int32](2)
	if errs := JobUpdate(changed, old); len(errs) != 0 {
		t.Fatalf("maxFailedIndexes change refused: %v", errs)
	}
	changed.Spec.BackoffLimitPerIndex = ptr.To[int32](2)
	if errs := JobUpdate(changed, old); !hasCause(errs, "spec.backoffLimitPerIndex", field.ErrorTypeInvalid) ||
		!strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
		t.Fatalf("backoffLimitPerIndex change: %v", errs)
	}
}
