package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPriorityClass(t *testing.T) {
	pc := func(name string, value int32, mutate func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
		p := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		pc        *schedulingv1.PriorityClass
		field     string // "" means valid
		msgSubstr string
	}{
		{"user class", pc("high", 1000000000, nil), "", ""},
		{"negative is fine", pc("low", -5, nil), "", ""},
		{"bootstrap class", &SystemPriorityClasses()[0], "", ""},
		{"above the user maximum", pc("huge", 1000000001, nil), "value", "maximum allowed value of a user defined priority is 1000000000"},
		{"reserved prefix", pc("system-mine", 1, nil), "metadata.name", "system-mine is not a known system priority class"},
		{"system class with another value", pc(SystemNodeCritical, 5, nil), "metadata.name", "value of system-node-critical PriorityClass must be 2000001000"},
		{"system class as default", pc(SystemClusterCritical, SystemCriticalPriority, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true }),
			"metadata.name", "globalDefault of system-cluster-critical PriorityClass must be false"},
		{"bad policy", pc("p", 1, func(p *schedulingv1.PriorityClass) { p.PreemptionPolicy = new(corev1.PreemptionPolicy("Maybe")) }),
			"preemptionPolicy", `Unsupported value: "Maybe"`},
		{"bad name", pc("Not_A_Name", 1, nil), "metadata.name", "RFC 1123"},
	} {
		errs := PriorityClass(tc.pc)
		if tc.field == "" {
			if len(errs) != 0 {
				t.Errorf("%s: %v", tc.name, errs)
			}
			continue
		}
		if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.msgSubstr) {
			t.Errorf("%s: %v, want one error on %s containing %q", tc.name, errs, tc.field, tc.msgSubstr)
		}
	}
}

func TestPriorityClassUpdate(t *testing.T) {
	old := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Value: 10, PreemptionPolicy: new(corev1.PreemptLowerPriority)}
	changed := old.DeepCopy()
	changed.Description = "now documented"
	if errs := PriorityClassUpdate(changed, old); len(errs) != 0 {
		t.Fatalf("description change: %v", errs)
	}
	changed.Value = 11
	changed.PreemptionPolicy = new(corev1.PreemptNever)
	errs := PriorityClassUpdate(changed, old)
	if len(errs) != 2 || errs[0].Field != "value" || !strings.Contains(errs[0].Error(), "may not be changed in an update.") ||
		errs[1].Field != "preemptionPolicy" || !strings.Contains(errs[1].Error(), "field is immutable") {
		t.Fatalf("got %v", errs)
	}
}
