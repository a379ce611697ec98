package validation

import (
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
)

func TestFlowSchemaValidation(t *testing.T) {
	ok := func() *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "fs"}, Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence: 500, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "pl"},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "g"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/apis/*"}}},
			}}}}
	}
	if errs := FlowSchema(ok()); len(errs) != 0 {
		t.Fatalf("valid FlowSchema: %v", errs)
	}
	for want, mutate := range map[string]func(*flowcontrolv1.FlowSchema){
		"spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1": func(f *flowcontrolv1.FlowSchema) { f.Spec.MatchingPrecedence = 1 },
		"spec.priorityLevelConfiguration.name: Required value":                                                    func(f *flowcontrolv1.FlowSchema) { f.Spec.PriorityLevelConfiguration.Name = "" },
		`spec.distinguisherMethod.type: Unsupported value: "ByPod"`: func(f *flowcontrolv1.FlowSchema) {
			f.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: "ByPod"}
		},
		"spec.rules[0].subjects[0].user: Forbidden: user is forbidden when subject kind is not 'User'": func(f *flowcontrolv1.FlowSchema) {
			f.Spec.Rules[0].Subjects[0].User = &flowcontrolv1.UserSubject{Name: "u"}
		},
		"spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a*\": wildcard can only do suffix matching": func(f *flowcontrolv1.FlowSchema) {
			f.Spec.Rules[0].NonResourceRules[0].NonResourceURLs[1] = "/a*"
		},
		`spec.rules[0].nonResourceRules[0].verbs: Unsupported value: ["fly"]`: func(f *flowcontrolv1.FlowSchema) {
			f.Spec.Rules[0].NonResourceRules[0].Verbs = []string{"fly"}
		},
		"spec.rules[0].resourceRules[0].namespaces: Required value": func(f *flowcontrolv1.FlowSchema) {
			f.Spec.Rules[0].ResourceRules = []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
		},
		"spec: Invalid value": func(f *flowcontrolv1.FlowSchema) { f.Name = "catch-all" },
	} {
		f := ok()
		mutate(f)
		if errs := FlowSchema(f); !strings.Contains(errs.ToAggregate().Error(), want) {
			t.Errorf("want %q, got %v", want, errs)
		}
	}
	for _, fs := range append(append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...) {
		if errs := FlowSchema(fs); len(errs) != 0 {
			t.Errorf("bootstrap FlowSchema %s: %v", fs.Name, errs)
		}
	}
}

func TestPriorityLevelConfigurationValidation(t *testing.T) {
	for _, pl := range append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...) {
		if errs := PriorityLevelConfiguration(pl); len(errs) != 0 {
			t.Errorf("bootstrap level %s: %v", pl.Name, errs)
		}
	}
	n := int32(-1)
	for want, pl := range map[string]flowcontrolv1.PriorityLevelConfigurationSpec{
		"spec.type: Invalid value: \"Exempt\": must be 'Exempt' if and only if `name` is 'exempt'": {Type: flowcontrolv1.PriorityLevelEnablementExempt},
		"spec.limited: Required value":                                       {Type: flowcontrolv1.PriorityLevelEnablementLimited},
		"spec.limited.nominalConcurrencyShares: Invalid value: -1":           {Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &n, LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
		"spec.limited.limitResponse.queuing: Required value":                 {Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue}}},
		"spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value": {Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 2}}}},
		"required entropy bits of deckSize 10000000 and handSize 20":         {Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 10000000, HandSize: 20, QueueLengthLimit: 1}}}},
	} {
		obj := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "pl"}, Spec: pl}
		if errs := PriorityLevelConfiguration(obj); !strings.Contains(errs.ToAggregate().Error(), want) {
			t.Errorf("want %q, got %v", want, errs)
		}
	}
}
