// Package rbac is rbac.authorization.k8s.io/v1: roles, clusterroles, rolebindings and
// clusterrolebindings on the generic registry, with kube-apiserver's validation and its
// privilege-escalation prevention:
//
//   - creating or updating a Role or ClusterRole succeeds only when the requesting user already holds
//     every rule it grants (in the role's namespace, or cluster-wide), or may "escalate" on it, or is in
//     system:masters; a ClusterRole with an aggregationRule needs full authority (its rules are whatever
//     the aggregation controller collects);
//   - creating or updating a binding succeeds only when the user holds every rule of the referenced role,
//     or may "bind" it, or is in system:masters.
//
// Refusals are 403 Forbidden naming the rules the user lacks. A binding's roleRef is immutable.
package rbac

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	rbacauthz "github.com/nodekit/nodekit/controlplane/apiserver/authz/rbac"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// Guard holds what the escalation checks need: the RBAC rule resolver (whose rules a user holds) and the
// API server's whole authorizer (for the "escalate" and "bind" verbs). Authorizer is set after the
// chain is built; until then only system:masters may write.
type Guard struct {
	Rules      *rbacauthz.Authorizer
	Authorizer authorizer.Authorizer
}

// fullAuthority is every permission: what a ClusterRole with an aggregationRule may end up granting.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// NewStorage returns the four resources keyed by name.
func NewStorage(getter generic.RESTOptionsGetter, g *Guard) (map[string]rest.Storage, error) {
	type kind struct {
		resource, singular string
		namespaced         bool
		newFn, newList     func() runtime.Object
		validate           func(runtime.Object) field.ErrorList
		validateUpdate     func(obj, old runtime.Object) field.ErrorList
		check              func(ctx context.Context, obj runtime.Object) error
	}
	kinds := []kind{
		{"roles", "role", true, func() runtime.Object { return &rbacv1.Role{} }, func() runtime.Object { return &rbacv1.RoleList{} },
			func(o runtime.Object) field.ErrorList { return validation.Role(o.(*rbacv1.Role)) }, nil,
			func(ctx context.Context, o runtime.Object) error {
				r := o.(*rbacv1.Role)
				return g.checkRole(ctx, "roles", r.Namespace, r.Name, r.Rules)
			}},
		{"clusterroles", "clusterrole", false, func() runtime.Object { return &rbacv1.ClusterRole{} }, func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			func(o runtime.Object) field.ErrorList { return validation.ClusterRole(o.(*rbacv1.ClusterRole)) }, nil,
			func(ctx context.Context, o runtime.Object) error {
				r := o.(*rbacv1.ClusterRole)
				rules := r.Rules
				if r.AggregationRule != nil {
					rules = fullAuthority
				}
				return g.checkRole(ctx, "clusterroles", "", r.Name, rules)
			}},
		{"rolebindings", "rolebinding", true, func() runtime.Object { return &rbacv1.RoleBinding{} }, func() runtime.Object { return &rbacv1.RoleBindingList{} },
			func(o runtime.Object) field.ErrorList { return validation.RoleBinding(o.(*rbacv1.RoleBinding)) },
			func(o, old runtime.Object) field.ErrorList {
				b := o.(*rbacv1.RoleBinding)
				return append(validation.RoleBinding(b), validation.RoleRefUpdate(b.RoleRef, old.(*rbacv1.RoleBinding).RoleRef)...)
			},
			func(ctx context.Context, o runtime.Object) error {
				b := o.(*rbacv1.RoleBinding)
				return g.checkBinding(ctx, "rolebindings", b.Namespace, b.Name, b.RoleRef)
			}},
		{"clusterrolebindings", "clusterrolebinding", false, func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			func(o runtime.Object) field.ErrorList {
				return validation.ClusterRoleBinding(o.(*rbacv1.ClusterRoleBinding))
			},
			func(o, old runtime.Object) field.ErrorList {
				b := o.(*rbacv1.ClusterRoleBinding)
				return append(validation.ClusterRoleBinding(b), validation.RoleRefUpdate(b.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)...)
			},
			func(ctx context.Context, o runtime.Object) error {
				b := o.(*rbacv1.ClusterRoleBinding)
				return g.checkBinding(ctx, "clusterrolebindings", "", b.Name, b.RoleRef)
			}},
	}
	m := map[string]rest.Storage{}
	for _, k := range kinds {
		s := store.NewStrategy(k.namespaced, false, k.validate)
		s.ValidateUpdateFn = k.validateUpdate
		main, _, err := store.New(getter, store.Spec{Resource: rbacv1.Resource(k.resource), Singular: k.singular,
			NewFunc: k.newFn, NewList: k.newList, Strategy: s})
		if err != nil {
			return nil, err
		}
		m[k.resource] = &guarded{REST: main, check: k.check}
	}
	return m, nil
}

// guarded runs an escalation check on the object being created or (after the update is applied to the
// stored object) updated.
type guarded struct {
	*store.REST
	check func(ctx context.Context, obj runtime.Object) error
}

// Create checks escalation, then creates.
func (r *guarded) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, o *metav1.CreateOptions) (runtime.Object, error) {
	if err := r.check(ctx, obj); err != nil {
		return nil, err
	}
	return r.REST.Create(ctx, obj, v, o)
}

// Update checks escalation on the updated object, then stores it.
func (r *guarded) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, cv rest.ValidateObjectFunc,
	uv rest.ValidateObjectUpdateFunc, force bool, o *metav1.UpdateOptions) (runtime.Object, bool, error) {
	checked := rest.WrapUpdatedObjectInfo(objInfo, func(ctx context.Context, obj, _ runtime.Object) (runtime.Object, error) {
		return obj, r.check(ctx, obj)
	})
	return r.REST.Update(ctx, name, checked, cv, uv, force, o)
}

func (g *Guard) checkRole(ctx context.Context, resource, namespace, name string, rules []rbacv1.PolicyRule) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(rbacv1.Resource(resource), name, errors.New("no user on the request"))
	}
	if rbacauthz.EscalationAllowed(ctx, g.Authorizer, u, resource, namespace, name) {
		return nil
	}
	if err := g.Rules.ConfirmNoEscalation(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(rbacv1.Resource(resource), name, err)
	}
	return nil
}

func (g *Guard) checkBinding(ctx context.Context, resource, namespace, name string, ref rbacv1.RoleRef) error {
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(gr, name, errors.New("no user on the request"))
	}
	if rbacauthz.BindAllowed(ctx, g.Authorizer, u, ref, namespace) {
		return nil
	}
	rules, err := g.Rules.RoleRefRules(ref, namespace)
	if err != nil {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("roleRef %s %q: %w", ref.Kind, ref.Name, err))
	}
	if err := g.Rules.ConfirmNoEscalation(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}
