package bootstrappolicy

import (
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Reconcile makes the cluster's RBAC objects cover the bootstrap policy, as kube-apiserver's
// "rbac/bootstrap-roles" post-start hook does (component-helpers' reconciliation): a missing object is
// created, an object with autoupdate "true" gets its missing rules, aggregation selectors or subjects
// added (extra ones an administrator added are kept), and an object annotated autoupdate "false" is left
// as it is. Namespaced roles' namespaces (kube-system, kube-public) are created when missing. It returns
// every failure joined; objects that reconciled stay reconciled.
func Reconcile(client kubernetes.Interface) error {
	var errs []error
	note := func(kind, namespace, name string, op reconciliation.ReconcileOperation, protected bool, err error) {
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("reconcile %s %s: %w", kind, joinName(namespace, name), err))
		case protected && op != reconciliation.ReconcileNone:
			slog.Warn("rbac bootstrap: not reconciled, autoupdate is off", "kind", kind, "namespace", namespace, "name", name)
		case op != reconciliation.ReconcileNone:
			slog.Info("rbac bootstrap: reconciled", "kind", kind, "namespace", namespace, "name", name, "operation", string(op))
		}
	}
	rbac, ns := client.RbacV1(), client.CoreV1().Namespaces()
	for _, r := range ClusterRoles() {
		res, err := (&reconciliation.ReconcileRoleOptions{Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: &r}, Confirm: true,
			Client: reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}}).Run()
		note("ClusterRole", "", r.Name, op(res), res != nil && res.Protected, err)
	}
	for _, b := range ClusterRoleBindings() {
		res, err := (&reconciliation.ReconcileRoleBindingOptions{RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b}, Confirm: true,
			Client: reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}}).Run()
		note("ClusterRoleBinding", "", b.Name, bop(res), res != nil && res.Protected, err)
	}
	for _, roles := range NamespaceRoles() {
		for _, r := range roles {
			res, err := (&reconciliation.ReconcileRoleOptions{Role: reconciliation.RoleRuleOwner{Role: &r}, Confirm: true,
				Client: reconciliation.RoleModifier{Client: rbac, NamespaceClient: ns}}).Run()
			note("Role", r.Namespace, r.Name, op(res), res != nil && res.Protected, err)
		}
	}
	for _, bindings := range NamespaceRoleBindings() {
		for _, b := range bindings {
			res, err := (&reconciliation.ReconcileRoleBindingOptions{RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &b}, Confirm: true,
				Client: reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: ns}}).Run()
			note("RoleBinding", b.Namespace, b.Name, bop(res), res != nil && res.Protected, err)
		}
	}
	return errors.Join(errs...)
}

func op(r *reconciliation.ReconcileClusterRoleResult) reconciliation.ReconcileOperation {
	if r == nil {
		return reconciliation.ReconcileNone
	}
	return r.Operation
}

func bop(r *reconciliation.ReconcileClusterRoleBindingResult) reconciliation.ReconcileOperation {
	if r == nil {
		return reconciliation.ReconcileNone
	}
	return r.Operation
}

func joinName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
