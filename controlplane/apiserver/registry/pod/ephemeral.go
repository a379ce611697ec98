package pod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// ephemeralStrategy is pods/ephemeralcontainers' update strategy (kube-apiserver's
// podEphemeralContainersStrategy): of the object sent, only spec.ephemeralContainers (and the
// resourceVersion precondition) is taken; everything else is the stored pod's. The kubelet of the pod's
// node starts the containers added.
type ephemeralStrategy struct {
	store.StatusStrategy
}

// PrepareForUpdate keeps the stored pod but for its ephemeral containers, and bumps metadata.generation
// when they changed (a spec change, as for the main resource).
func (s *ephemeralStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	ecs, rv := p.Spec.EphemeralContainers, p.ResourceVersion
	*p = *o.DeepCopy()
	p.ResourceVersion = rv
	p.Spec.EphemeralContainers = ecs
	if !apiequality.Semantic.DeepEqual(ecs, o.Spec.EphemeralContainers) {
		p.Generation = o.Generation + 1
	}
}

func validateEphemeralUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.PodEphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}
