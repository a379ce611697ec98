package admission

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/nodekit/nodekit/controlplane/apiserver/authz"
)

// NodeRestriction is Kubernetes' NodeRestriction plugin, narrowed to what nodekit serves: a node
// (system:node:<name>) may create, change and delete only its own Node object, change the status of and
// delete only pods bound to it (create only pods bound to it, i.e. mirror pods), and manage only its own Lease in kube-node-lease. Violations are 403 Forbidden.
type NodeRestriction struct{}

var _ admission.ValidationInterface = NodeRestriction{}

// Handles create, update and delete.
func (NodeRestriction) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update || op == admission.Delete
}

// Validate enforces the rules for node users; other users pass.
func (NodeRestriction) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	node, ok := authz.NodeName(a.GetUserInfo())
	if !ok {
		return nil
	}
	gr := a.GetResource().GroupResource()
	switch gr {
	case corev1.Resource("nodes"):
		name := a.GetName()
		if n, ok := a.GetObject().(*corev1.Node); ok && a.GetOperation() == admission.Create {
			name = n.Name
		}
		if name != node {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", node, name))
		}
	case corev1.Resource("pods"):
		var bound string
		switch {
		case a.GetOperation() == admission.Create && a.GetSubresource() == "":
			if p, ok := a.GetObject().(*corev1.Pod); ok {
				bound = p.Spec.NodeName
			}
		default:
			if p, ok := a.GetOldObject().(*corev1.Pod); ok {
				bound = p.Spec.NodeName
			}
		}
		if bound != node {
			return admission.NewForbidden(a, fmt.Errorf("node %q can only %s pods bound to it (pod %q is bound to %q)", node, a.GetOperation(), a.GetName(), bound))
		}
	case coordinationv1.Resource("leases"):
		name := a.GetName()
		if l, ok := a.GetObject().(*coordinationv1.Lease); ok && a.GetOperation() == admission.Create {
			name = l.Name
		}
		if a.GetNamespace() != corev1.NamespaceNodeLease || name != node {
			return admission.NewForbidden(a, fmt.Errorf("node %q can only access its own lease in %s", node, corev1.NamespaceNodeLease))
		}
	}
	return nil
}
