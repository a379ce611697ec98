package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResourceQuotaValidation(t *testing.T) {
	valid := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{"pods": resource.MustParse("2"), "requests.cpu": resource.MustParse("500m"),
			"count/deployments.apps": resource.MustParse("3"), "requests.example.com/gpu": resource.MustParse("1"),
			"gold.storageclass.storage.k8s.io/requests.storage": resource.MustParse("1Gi")},
		Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating},
		ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}},
	}}
	if errs := ResourceQuota(valid); len(errs) != 0 {
		t.Fatalf("valid quota: %v", errs)
	}
	changed := valid.DeepCopy()
	changed.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
	if errs := ResourceQuotaUpdate(changed, valid); len(errs) != 1 || errs[0].Field != "spec.scopes" {
		t.Errorf("scope change: %v", errs)
	}
	bad := valid.DeepCopy()
	bad.Status.Used = corev1.ResourceList{"pods": resource.MustParse("-1")}
	if errs := ResourceQuotaStatus(bad); len(errs) != 1 || errs[0].Field != "status.used[pods]" {
		t.Errorf("negative used: %v", errs)
	}
	priority := valid.DeepCopy()
	priority.Spec.ScopeSelector.MatchExpressions[0].Values = nil
	if errs := ResourceQuota(priority); len(errs) != 1 || errs[0].Field != "spec.scopeSelector.matchExpressions[0].values" {
		t.Errorf("In without values: %v", errs)
	}
}
