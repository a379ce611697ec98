package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// PriorityClassGetter reads one PriorityClass by name (a NotFound error when there is none).
type PriorityClassGetter func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error)

// PriorityClassLister lists every PriorityClass.
type PriorityClassLister func(ctx context.Context) ([]schedulingv1.PriorityClass, error)

// Priority is Kubernetes' Priority admission plugin (plugin/pkg/admission/priority). On pod creation it
// resolves spec.priorityClassName into spec.priority and spec.preemptionPolicy: the named class (refused
// with "no PriorityClass with name x was found" when missing), or without a name the globalDefault class
// (its name is set too; the lowest value when several are), or priority 0 and PreemptLowerPriority. A pod
// that sets spec.priority or spec.preemptionPolicy to something else than its class gives is refused. On
// pod update the stored priority and preemptionPolicy are kept. A PriorityClass that is globalDefault is
// refused while another class is ("PriorityClass x is already marked as default. Only one default can
// exist"). The classes are read from storage, not a cache, so a class created just before its pods is seen.
type Priority struct {
	Get  PriorityClassGetter
	List PriorityClassLister
}

var (
	_ admission.MutationInterface   = &Priority{}
	_ admission.ValidationInterface = &Priority{}
)

// Handles pod and PriorityClass creation and update.
func (p *Priority) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

var (
	podsResource            = corev1.Resource("pods")
	priorityClassesResource = schedulingv1.Resource("priorityclasses")
)

// Admit resolves a new pod's priority and keeps an updated pod's.
func (p *Priority) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != podsResource || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	if a.GetOperation() == admission.Update {
		if old, ok := a.GetOldObject().(*corev1.Pod); ok {
			if old.Spec.Priority != nil {
				pod.Spec.Priority = old.Spec.Priority
			}
			if old.Spec.PreemptionPolicy != nil {
				pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
			}
		}
		return nil
	}
	var priority int32
	var policy *corev1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		def, err := p.defaultClass(ctx)
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %w", err)
		}
		if def != nil {
			pod.Spec.PriorityClassName, priority, policy = def.Name, def.Value, def.PreemptionPolicy
		} else {
			lower := corev1.PreemptLowerPriority
			policy = &lower
		}
	} else {
		pc, err := p.Get(ctx, pod.Spec.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return fmt.Errorf("failed to get PriorityClass with name %s: %w", pod.Spec.PriorityClassName, err)
		}
		priority, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return admission.NewForbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return admission.NewForbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		v := *policy
		pod.Spec.PreemptionPolicy = &v
	}
	return nil
}

// Validate refuses a second globalDefault PriorityClass.
func (p *Priority) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != priorityClassesResource || a.GetSubresource() != "" {
		return nil
	}
	pc, ok := a.GetObject().(*schedulingv1.PriorityClass)
	if !ok || !pc.GlobalDefault {
		return nil
	}
	def, err := p.defaultClass(ctx)
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %w", err)
	}
	if def != nil && (a.GetOperation() == admission.Create || def.Name != pc.Name) {
		return admission.NewForbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// defaultClass returns the globalDefault class with the lowest value, or nil when none is.
func (p *Priority) defaultClass(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	list, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for i := range list {
		if pc := &list[i]; pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def, nil
}
