package defaults

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// registerScheduling defaults PriorityClasses as kube-apiserver does (pkg/apis/scheduling/v1/defaults.go).
func registerScheduling(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(o any) { PriorityClass(o.(*schedulingv1.PriorityClass)) })
}

// PriorityClass defaults preemptionPolicy to PreemptLowerPriority.
func PriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}
