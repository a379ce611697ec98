package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
)

func fixedClasses(classes ...schedulingv1.PriorityClass) *Priority {
	return &Priority{
		Get: func(_ context.Context, name string) (*schedulingv1.PriorityClass, error) {
			for i := range classes {
				if classes[i].Name == name {
					return &classes[i], nil
				}
			}
			return nil, apierrors.NewNotFound(schedulingv1.Resource("priorityclasses"), name)
		},
		List: func(context.Context) ([]schedulingv1.PriorityClass, error) { return classes, nil },
	}
}

func priorityPodAttrs(pod, old *corev1.Pod, op admission.Operation) admission.Attributes {
	return admission.NewAttributesRecord(pod, old, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", op, nil, false, nil)
}

func TestPriorityDefaultClassAndUpdate(t *testing.T) {
	never := corev1.PreemptNever
	p := fixedClasses(
		schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "d-high"}, Value: 50, GlobalDefault: true},
		schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "d-low"}, Value: 20, GlobalDefault: true, PreemptionPolicy: &never})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	if err := p.Admit(context.Background(), priorityPodAttrs(pod, nil, admission.Create), nil); err != nil {
		t.Fatal(err)
	}
	// Several defaults: the lowest value wins, with its policy.
	if pod.Spec.PriorityClassName != "d-low" || *pod.Spec.Priority != 20 || *pod.Spec.PreemptionPolicy != never {
		t.Fatalf("got %q %d %v", pod.Spec.PriorityClassName, *pod.Spec.Priority, *pod.Spec.PreemptionPolicy)
	}
	upd := pod.DeepCopy()
	upd.Spec.Priority = new(int32(1))
	if err := p.Admit(context.Background(), priorityPodAttrs(upd, pod, admission.Update), nil); err != nil || *upd.Spec.Priority != 20 {
		t.Fatalf("update: %v, priority %d", err, *upd.Spec.Priority)
	}
	// No class at all: 0 and PreemptLowerPriority.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}
	if err := fixedClasses().Admit(context.Background(), priorityPodAttrs(bare, nil, admission.Create), nil); err != nil ||
		*bare.Spec.Priority != 0 || *bare.Spec.PreemptionPolicy != corev1.PreemptLowerPriority || bare.Spec.PriorityClassName != "" {
		t.Fatalf("bare: %v %+v", err, bare.Spec)
	}
	// A second default is refused, re-saving the default itself is not.
	pcAttrs := func(pc *schedulingv1.PriorityClass, op admission.Operation) admission.Attributes {
		return admission.NewAttributesRecord(pc, nil, schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), "", pc.Name,
			schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), "", op, nil, false, nil)
	}
	one := fixedClasses(schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Value: 1, GlobalDefault: true})
	err := one.Validate(context.Background(), pcAttrs(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e"}, GlobalDefault: true}, admission.Create), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass d is already marked as default. Only one default can exist") {
		t.Fatalf("second default: %v", err)
	}
	if err := one.Validate(context.Background(), pcAttrs(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "d"}, GlobalDefault: true}, admission.Update), nil); err != nil {
		t.Fatalf("update of the default: %v", err)
	}
}
