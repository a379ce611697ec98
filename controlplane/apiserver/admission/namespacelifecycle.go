package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
)

// ImmortalNamespaces may never be deleted.
var ImmortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, "kube-system": true, "kube-public": true, corev1.NamespaceNodeLease: true,
}

// NamespaceGetter reads a namespace (bypassing authorization); a missing one is a NotFound error.
type NamespaceGetter func(ctx context.Context, name string) (*corev1.Namespace, error)

// NamespaceLifecycle is Kubernetes' NamespaceLifecycle plugin: objects may be created only in a namespace
// that exists and is not Terminating, and the system namespaces may not be deleted. As upstream's it
// decides in the mutating phase (it mutates nothing), first of the chain, so a request for a missing
// namespace gets its 404 before any later plugin looks into that namespace.
type NamespaceLifecycle struct {
	Namespaces NamespaceGetter
}

var _ admission.MutationInterface = &NamespaceLifecycle{}

// Handles create and delete.
func (p *NamespaceLifecycle) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Delete
}

// Admit enforces the rules above: 404 for a missing namespace, 403 for a terminating or immortal one.
func (p *NamespaceLifecycle) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetKind().GroupKind() == corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind() || a.GetResource().Resource == "namespaces" {
		if a.GetOperation() == admission.Delete && ImmortalNamespaces[a.GetName()] {
			return admission.NewForbidden(a, fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.GetOperation() != admission.Create || a.GetNamespace() == "" {
		return nil
	}
	ns, err := p.Namespaces(ctx, a.GetNamespace())
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), a.GetNamespace())
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if ns.Status.Phase == corev1.NamespaceTerminating && a.GetSubresource() == "" {
		return admission.NewForbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	return nil
}
