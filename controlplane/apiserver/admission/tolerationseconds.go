package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"
)

// DefaultTolerationSeconds is Kubernetes' DefaultTolerationSeconds plugin: every new pod tolerates the
// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable NoExecute taints for Seconds (300 in
// Kubernetes; lower it in labs to see eviction sooner), unless it already tolerates them.
type DefaultTolerationSeconds struct {
	Seconds int64
}

var _ admission.MutationInterface = &DefaultTolerationSeconds{}

// Handles pod creation.
func (p *DefaultTolerationSeconds) Handles(op admission.Operation) bool {
	return op == admission.Create
}

// Admit adds the two tolerations.
func (p *DefaultTolerationSeconds) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		tolerated := false
		for _, t := range pod.Spec.Tolerations {
			if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") && t.Operator == corev1.TolerationOpExists {
				tolerated = true
			}
		}
		if !tolerated {
			s := p.Seconds
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &s})
		}
	}
	return nil
}
