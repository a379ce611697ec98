package bootstrappolicy

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestPolicyIsConsistent: names are unique, every object is labelled and annotated for reconciliation,
// and every binding refers to a role the policy installs.
func TestPolicyIsConsistent(t *testing.T) {
	clusterRoles := map[string]rbacv1.ClusterRole{}
	for _, r := range ClusterRoles() {
		if _, dup := clusterRoles[r.Name]; dup {
			t.Errorf("ClusterRole %s twice", r.Name)
		}
		clusterRoles[r.Name] = r
		if r.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" || r.Annotations[rbacv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("ClusterRole %s: labels %v annotations %v", r.Name, r.Labels, r.Annotations)
		}
		if r.AggregationRule == nil && len(r.Rules) == 0 {
			t.Errorf("ClusterRole %s grants nothing", r.Name)
		}
	}
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:public-info-viewer",
		"system:node-bootstrapper", "system:node-proxier", "system:kube-scheduler", "system:kube-controller-manager", "system:kube-dns",
		"system:controller:clusterrole-aggregation-controller", "system:controller:cronjob-controller", "system:controller:job-controller"} {
		if _, ok := clusterRoles[name]; !ok {
			t.Errorf("ClusterRole %s missing", name)
		}
	}
	names := map[string]bool{}
	for _, b := range ClusterRoleBindings() {
		if names[b.Name] {
			t.Errorf("ClusterRoleBinding %s twice", b.Name)
		}
		names[b.Name] = true
		if _, ok := clusterRoles[b.RoleRef.Name]; !ok || b.RoleRef.Kind != "ClusterRole" {
			t.Errorf("ClusterRoleBinding %s refers to %s %s, which the policy does not install", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
	}
	roles := NamespaceRoles()
	for ns, bindings := range NamespaceRoleBindings() {
		for _, b := range bindings {
			found := false
			for _, r := range roles[ns] {
				found = found || r.Name == b.RoleRef.Name
			}
			if !found || b.Namespace != ns {
				t.Errorf("RoleBinding %s/%s refers to Role %s, which the policy does not install there", ns, b.Name, b.RoleRef.Name)
			}
		}
	}
}
