package quota

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

// ClaimsResource is core/v1 persistentvolumeclaims, which nodekit does not serve.
var ClaimsResource = corev1.Resource("persistentvolumeclaims")

// storageClassSuffix ends the per-class claim names: <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// claimEvaluator accounts for PersistentVolumeClaims. nodekit serves no persistentvolumeclaims (a
// request for one is 404 before admission), so no claim exists and every claim resource is used 0:
// persistentvolumeclaims, count/persistentvolumeclaims, requests.storage and the per-storage-class
// <class>.storageclass.storage.k8s.io/{persistentvolumeclaims,requests.storage}.
type claimEvaluator struct{}

var _ quotav1.Evaluator = claimEvaluator{}

// IsClaimResource reports whether name is a PersistentVolumeClaim quota resource.
func IsClaimResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage, generic.ObjectCountQuotaResourceNameFor(ClaimsResource):
		return true
	}
	i := strings.Index(string(name), storageClassSuffix)
	if i <= 0 {
		return false
	}
	rest := corev1.ResourceName(string(name)[i+len(storageClassSuffix):])
	return rest == corev1.ResourcePersistentVolumeClaims || rest == corev1.ResourceRequestsStorage
}

func (claimEvaluator) GroupResource() schema.GroupResource                     { return ClaimsResource }
func (claimEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }
func (claimEvaluator) Handles(admission.Attributes) bool                       { return false }
func (c claimEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, c.MatchingResources, generic.MatchesNoScopeFunc)
}
func (claimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, r := range input {
		if IsClaimResource(r) {
			out = append(out, r)
		}
	}
	return out
}
func (claimEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}
func (claimEvaluator) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}
func (claimEvaluator) Usage(runtime.Object) (corev1.ResourceList, error) {
	return corev1.ResourceList{}, nil
}

// UsageStats is zero for every requested claim resource: there are no claims.
func (claimEvaluator) UsageStats(options quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	used := corev1.ResourceList{}
	for _, r := range options.Resources {
		used[r] = resource.Quantity{Format: resource.DecimalSI}
	}
	return quotav1.UsageStats{Used: used}, nil
}
