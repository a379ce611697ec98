package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func res(verb, group, resource, sub, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
}

func TestRuleAllows(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule rbacv1.PolicyRule
		req  authorizer.AttributesRecord
		want bool
	}{
		{"exact", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "", "x"), true},
		{"other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("list", "", "pods", "", ""), false},
		{"other group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"deployments"}}, res("get", "apps", "deployments", "", ""), false},
		{"resource does not cover subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", "x"), false},
		{"subresource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"pods/status"}}, res("update", "", "pods", "status", "x"), true},
		{"*/scale", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("get", "apps", "deployments", "scale", "x"), true},
		{"*/scale is not */status", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("get", "apps", "deployments", "status", "x"), false},
		{"* covers subresources", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, res("create", "", "pods", "exec", "x"), true},
		{"resourceNames", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("get", "", "configmaps", "", "a"), true},
		{"resourceNames other name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("get", "", "configmaps", "", "b"), false},
		{"resourceNames list without name", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("list", "", "configmaps", "", ""), false},
		{"url", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, authorizer.AttributesRecord{Verb: "get", Path: "/healthz"}, true},
		{"url prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}, authorizer.AttributesRecord{Verb: "get", Path: "/healthz/etcd"}, true},
		{"url prefix not the bare path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}, authorizer.AttributesRecord{Verb: "get", Path: "/healthz"}, false},
		{"url rule does not match resources", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, res("get", "", "pods", "", ""), false},
	} {
		if got := RuleAllows(tc.req, &tc.rule); got != tc.want {
			t.Errorf("%s: RuleAllows = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAuthorizeBindings(t *testing.T) {
	client := fake.NewSimpleClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "a"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}},
		// a RoleBinding granting a ClusterRole's rules in namespace a; the ServiceAccount subject has no namespace
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "a"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app"}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "a"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "cm"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "devs"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "missing"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}},
	)
	f := informers.NewSharedInformerFactory(client, 0)
	z := &Authorizer{Roles: f.Rbac().V1().Roles().Lister(), RoleBindings: f.Rbac().V1().RoleBindings().Lister(),
		ClusterRoles: f.Rbac().V1().ClusterRoles().Lister(), ClusterRoleBindings: f.Rbac().V1().ClusterRoleBindings().Lister()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	sa := &user.DefaultInfo{Name: "system:serviceaccount:a:app"}
	check := func(u user.Info, ns, verb, resource string, want authorizer.Decision, reason string) {
		t.Helper()
		a := res(verb, "", resource, "", "")
		a.User, a.Namespace = u, ns
		d, why, err := z.Authorize(ctx, a)
		if d != want || err != nil || !strings.Contains(why, reason) {
			t.Errorf("%s %s %s in %q: %v %q %v, want %v %q", u.GetName(), verb, resource, ns, d, why, err, want, reason)
		}
	}
	check(sa, "a", "get", "pods", authorizer.DecisionAllow, `RoleBinding "a/rb" of ClusterRole "reader" to ServiceAccount "a/app"`)
	check(sa, "b", "get", "pods", authorizer.DecisionNoOpinion, "")
	check(&user.DefaultInfo{Name: "system:serviceaccount:b:app"}, "a", "get", "pods", authorizer.DecisionNoOpinion, "")
	check(&user.DefaultInfo{Name: "carol", Groups: []string{"devs"}}, "a", "list", "configmaps", authorizer.DecisionAllow, `Group "devs"`)
	check(&user.DefaultInfo{Name: "bob"}, "a", "get", "pods", authorizer.DecisionNoOpinion, `clusterrole.rbac.authorization.k8s.io "missing" not found`)
	if err := z.ConfirmNoEscalation(sa, "a", []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}); err == nil ||
		!strings.Contains(err.Error(), `{APIGroups:[""], Resources:["pods"], Verbs:["list"]}`) {
		t.Errorf("ConfirmNoEscalation: %v", err)
	}
	if err := z.ConfirmNoEscalation(sa, "a", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}); err != nil {
		t.Errorf("ConfirmNoEscalation of a held rule: %v", err)
	}
}
