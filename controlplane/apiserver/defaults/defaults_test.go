package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestBindingDefaults: a binding written without roleRef.apiGroup (as upstream's webhook conformance
// spec writes its RoleBinding) gets rbac.authorization.k8s.io, as do its User and Group subjects;
// a ServiceAccount subject keeps the core group and a set apiGroup is left alone.
func TestBindingDefaults(t *testing.T) {
	s := runtime.NewScheme()
	Register(s)
	subjects := func() []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "u"}, {Kind: rbacv1.GroupKind, Name: "g"},
			{Kind: rbacv1.ServiceAccountKind, Name: "sa", Namespace: "ns"}}
	}
	rb := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: subjects()}
	crb := &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "r"}, Subjects: subjects()}
	s.Default(rb)
	s.Default(crb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName || crb.RoleRef.APIGroup != "example.com" {
		t.Errorf("roleRef apiGroups %q, %q; want %q and the given example.com", rb.RoleRef.APIGroup, crb.RoleRef.APIGroup, rbacv1.GroupName)
	}
	for _, subs := range [][]rbacv1.Subject{rb.Subjects, crb.Subjects} {
		if subs[0].APIGroup != rbacv1.GroupName || subs[1].APIGroup != rbacv1.GroupName || subs[2].APIGroup != "" {
			t.Errorf("subjects %+v: want User and Group in %s, ServiceAccount in the core group", subs, rbacv1.GroupName)
		}
	}
}

func TestLimitRangeItem(t *testing.T) {
	q := resource.MustParse
	item := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}, Default: corev1.ResourceList{"memory": q("512Mi")},
		Min: corev1.ResourceList{"ephemeral-storage": q("1Gi")}}
	LimitRangeItem(&item)
	if item.Default.Cpu().String() != "2" || item.Default.Memory().String() != "512Mi" {
		t.Errorf("default %v, want cpu from max, memory kept", item.Default)
	}
	if item.DefaultRequest.Cpu().String() != "2" || item.DefaultRequest.Memory().String() != "512Mi" || item.DefaultRequest.StorageEphemeral().String() != "1Gi" {
		t.Errorf("defaultRequest %v, want cpu and memory from default, ephemeral-storage from min", item.DefaultRequest)
	}
	pod := corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"cpu": q("2")}}
	LimitRangeItem(&pod)
	if pod.Default != nil || pod.DefaultRequest != nil {
		t.Errorf("Pod item defaulted: %+v", pod)
	}
}
