package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/podspec"
)

// schedulingPod is a valid pod using every scheduling field: gates, node affinity (required and
// preferred), pod affinity and anti-affinity terms with matchLabelKeys/mismatchLabelKeys, and a
// topology spread constraint with minDomains and both node inclusion policies.
func schedulingPod() *corev1.Pod {
	sel := func() *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	two := int32(2)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "web", "rev": "1"}}, Spec: corev1.PodSpec{
		Containers:      []corev1.Container{{Name: "c", Image: "nginx:1.25"}},
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}},
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
					MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n1"}}},
				}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cpu", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}}}}},
			},
			PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelTopologyZone, LabelSelector: sel(),
					MatchLabelKeys: []string{"rev"}, Namespaces: []string{"other"}}},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: corev1.LabelHostname, LabelSelector: sel(), MismatchLabelKeys: []string{"rev"},
					NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}}}},
			},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel(), MinDomains: &two, MatchLabelKeys: []string{"rev"},
			NodeAffinityPolicy: &honor, NodeTaintsPolicy: &ignore}},
	}}
	podspec.Default(&pod.Spec)
	return pod
}

// TestSchedulingFieldsValidation checks that each bad scheduling field is refused naming that field
// (the API server answers 422 with it as the cause's field) with Kubernetes' message.
func TestSchedulingFieldsValidation(t *testing.T) {
	type spec = corev1.PodSpec
	na := func(s *spec) *corev1.NodeAffinity { return s.Affinity.NodeAffinity }
	paTerm := func(s *spec) *corev1.PodAffinityTerm {
		return &s.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	}
	antiTerm := func(s *spec) *corev1.WeightedPodAffinityTerm {
		return &s.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0]
	}
	tsc := func(s *spec) *corev1.TopologySpreadConstraint { return &s.TopologySpreadConstraints[0] }
	const (
		nodeReq = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
		podReq  = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
		antiPre = "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
		spread  = "spec.topologySpreadConstraints[0]"
	)
	for _, tc := range []struct {
		name, field, msg string
		mutate           func(*corev1.Pod)
	}{
		{"valid", "", "", func(*corev1.Pod) {}},
		{"gate not a qualified name", "spec.schedulingGates[1]", "name part must consist of", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "bad gate"})
		}},
		{"duplicate gate", "spec.schedulingGates[1]", "Duplicate value", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, p.Spec.SchedulingGates[0])
		}},
		{"nodeName with gates", "spec.nodeName", "cannot be set until all schedulingGates have been cleared", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }},
		{"no node selector terms", nodeReq, "must have at least one node selector term", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = nil
		}},
		{"bad node operator", nodeReq + "[0].matchExpressions[0].operator", "not a valid selector operator", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Operator = "Near"
		}},
		{"In without values", nodeReq + "[0].matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = nil
		}},
		{"bad node label key", nodeReq + "[0].matchExpressions[0].key", "name part must consist of", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key = "a b"
		}},
		{"bad required node label value", nodeReq + "[0].matchExpressions[0].values[0]", "a valid label must be", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"-x-"}
		}},
		{"bad field selector key", nodeReq + "[0].matchFields[0].key", "not a valid field selector key", func(p *corev1.Pod) {
			na(&p.Spec).RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Key = "spec.podCIDR"
		}},
		{"Gt with two values", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values",
			"must be specified single value when `operator` is 'Lt' or 'Gt'", func(p *corev1.Pod) {
				na(&p.Spec).PreferredDuringSchedulingIgnoredDuringExecution[0].Preference.MatchExpressions[0].Values = []string{"1", "2"}
			}},
		{"node preference weight 0", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "must be in the range 1-100",
			func(p *corev1.Pod) { na(&p.Spec).PreferredDuringSchedulingIgnoredDuringExecution[0].Weight = 0 }},
		{"pod affinity without topologyKey", podReq + ".topologyKey", "can not be empty", func(p *corev1.Pod) { paTerm(&p.Spec).TopologyKey = "" }},
		{"pod affinity bad topologyKey", podReq + ".topologyKey", "name part must consist of", func(p *corev1.Pod) { paTerm(&p.Spec).TopologyKey = "zone/" }},
		{"pod affinity selector bad operator", podReq + ".labelSelector.matchExpressions[0].operator", "not a valid selector operator", func(p *corev1.Pod) {
			paTerm(&p.Spec).LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}
		}},
		{"pod affinity bad namespace", podReq + ".namespace", "a lowercase RFC 1123 label", func(p *corev1.Pod) { paTerm(&p.Spec).Namespaces = []string{"Bad_NS"} }},
		{"matchLabelKeys key also in labelSelector", podReq + ".matchLabelKeys[0]", "exists in both matchLabelKeys and labelSelector", func(p *corev1.Pod) {
			// As merged at creation: the user's app In (web) plus the merged app In (web).
			t := paTerm(&p.Spec)
			t.MatchLabelKeys = []string{"app"}
			t.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}
		}},
		{"key in matchLabelKeys and mismatchLabelKeys", podReq + ".matchLabelKeys[0]", "exists in both matchLabelKeys and mismatchLabelKeys", func(p *corev1.Pod) {
			paTerm(&p.Spec).MismatchLabelKeys = []string{"rev"}
		}},
		{"matchLabelKeys without labelSelector", podReq + ".matchLabelKeys", "must not be specified when labelSelector is not set", func(p *corev1.Pod) {
			paTerm(&p.Spec).LabelSelector = nil
		}},
		{"anti-affinity weight 101", antiPre + ".weight", "must be in the range 1-100", func(p *corev1.Pod) { antiTerm(&p.Spec).Weight = 101 }},
		{"anti-affinity bad mismatchLabelKeys key", antiPre + ".podAffinityTerm.mismatchLabelKeys[0]", "name part must consist of", func(p *corev1.Pod) {
			antiTerm(&p.Spec).PodAffinityTerm.MismatchLabelKeys = []string{"a b"}
		}},
		{"anti-affinity bad namespaceSelector", antiPre + ".podAffinityTerm.namespaceSelector.matchExpressions[0].values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'", func(p *corev1.Pod) {
			antiTerm(&p.Spec).PodAffinityTerm.NamespaceSelector.MatchExpressions[0].Values = []string{"x"}
		}},
		{"maxSkew 0", spread + ".maxSkew", "must be greater than zero", func(p *corev1.Pod) { tsc(&p.Spec).MaxSkew = 0 }},
		{"spread without topologyKey", spread + ".topologyKey", "can not be empty", func(p *corev1.Pod) { tsc(&p.Spec).TopologyKey = "" }},
		{"bad whenUnsatisfiable", spread + ".whenUnsatisfiable", `supported values: "DoNotSchedule", "ScheduleAnyway"`, func(p *corev1.Pod) { tsc(&p.Spec).WhenUnsatisfiable = "Maybe" }},
		{"minDomains 0", spread + ".minDomains", "must be greater than zero", func(p *corev1.Pod) { zero := int32(0); tsc(&p.Spec).MinDomains = &zero }},
		{"minDomains with ScheduleAnyway", spread + ".minDomains", "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway", func(p *corev1.Pod) {
			tsc(&p.Spec).WhenUnsatisfiable = corev1.ScheduleAnyway
		}},
		{"bad nodeAffinityPolicy", spread + ".nodeAffinityPolicy", `supported values: "Honor", "Ignore"`, func(p *corev1.Pod) {
			pol := corev1.NodeInclusionPolicy("Sometimes")
			tsc(&p.Spec).NodeAffinityPolicy = &pol
		}},
		{"bad nodeTaintsPolicy", spread + ".nodeTaintsPolicy", `supported values: "Honor", "Ignore"`, func(p *corev1.Pod) {
			pol := corev1.NodeInclusionPolicy("honor")
			tsc(&p.Spec).NodeTaintsPolicy = &pol
		}},
		{"duplicate spread constraint", spread + ".{topologyKey, whenUnsatisfiable}", "Duplicate value: \"{topology.kubernetes.io/zone, DoNotSchedule}\"", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, *tsc(&p.Spec).DeepCopy())
		}},
		{"spread matchLabelKeys without labelSelector", spread + ".matchLabelKeys", "must not be specified when labelSelector is not set", func(p *corev1.Pod) {
			tsc(&p.Spec).LabelSelector = nil
		}},
		{"spread matchLabelKeys key also in labelSelector", spread + ".matchLabelKeys[0]", "exists in both matchLabelKeys and labelSelector", func(p *corev1.Pod) {
			c := tsc(&p.Spec)
			c.LabelSelector.MatchLabels["rev"] = "1"
			c.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "rev", Operator: metav1.LabelSelectorOpIn, Values: []string{"1"}}}
		}},
		{"spread bad labelSelector value", spread + ".labelSelector.matchLabels", "a valid label must be", func(p *corev1.Pod) {
			tsc(&p.Spec).LabelSelector.MatchLabels["app"] = "-bad-"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := schedulingPod()
			tc.mutate(p)
			errs := Pod(p)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			if !hasError(errs, tc.field, tc.msg) {
				t.Fatalf("want an error on %s with %q, got %v", tc.field, tc.msg, errs)
			}
		})
	}
}

// TestPodUpdateSchedulingGates checks gates may be removed on update, one at a time or all, but not added.
func TestPodUpdateSchedulingGates(t *testing.T) {
	old := schedulingPod()
	old.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		name  string
		gates []corev1.PodSchedulingGate
		field string
	}{
		{"unchanged", []corev1.PodSchedulingGate{{Name: "a"}, {Name: "b"}}, ""},
		{"remove one", []corev1.PodSchedulingGate{{Name: "b"}}, ""},
		{"remove all", nil, ""},
		{"add one", []corev1.PodSchedulingGate{{Name: "a"}, {Name: "b"}, {Name: "c"}}, "spec.schedulingGates[2].name"},
		{"replace one", []corev1.PodSchedulingGate{{Name: "c"}, {Name: "b"}}, "spec.schedulingGates[0].name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := old.DeepCopy()
			p.Spec.SchedulingGates = tc.gates
			errs := PodUpdate(p, old)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			if !hasError(errs, tc.field, "only deletion is allowed, but found new scheduling gate 'c'") {
				t.Fatalf("want an error on %s, got %v", tc.field, errs)
			}
		})
	}
	// Other spec changes of a gated pod stay forbidden.
	p := old.DeepCopy()
	p.Spec.TopologySpreadConstraints[0].MaxSkew = 2
	if errs := PodUpdate(p, old); !hasError(errs, "spec", "pod updates may not change fields") {
		t.Fatalf("changing maxSkew on update: want forbidden, got %v", errs)
	}
}

func hasError(errs field.ErrorList, path, msg string) bool {
	for _, e := range errs {
		if e.Field == path && strings.Contains(e.Error(), msg) {
			return true
		}
	}
	return false
}
