package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

// ClaimsResource is core/v1 persistentvolumeclaims.
var ClaimsResource = corev1.Resource("persistentvolumeclaims")

// storageClassSuffix ends the per-class claim names: <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// claimEvaluator charges PersistentVolumeClaims as upstream's persistentvolumeclaim evaluator: each
// claim counts once in persistentvolumeclaims and count/persistentvolumeclaims and its
// spec.resources.requests.storage in requests.storage, and the same under its class's
// <class>.storageclass.storage.k8s.io/{persistentvolumeclaims,requests.storage}. Creates are charged
// (a claim's request never changes: nodekit does not expand volumes).
type claimEvaluator struct {
	list generic.ListFuncByNamespace
}

var _ quotav1.Evaluator = &claimEvaluator{}

// newClaimEvaluator returns the claim evaluator; listers may be nil (admission).
func newClaimEvaluator(listers quotav1.ListerForResourceFunc) *claimEvaluator {
	return &claimEvaluator{list: listFunc(listers, ClaimsResource.WithVersion("v1"))}
}

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

// GroupResource is core/v1 persistentvolumeclaims.
func (c *claimEvaluator) GroupResource() schema.GroupResource { return ClaimsResource }

// Constraints puts no per-object requirement.
func (c *claimEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Handles the creation of claims.
func (c *claimEvaluator) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && a.GetOperation() == admission.Create
}

// Matches reports whether quota tracks a claim resource (claims have no scopes).
func (c *claimEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, c.MatchingResources, generic.MatchesNoScopeFunc)
}

// MatchingResources returns the claim resource names among input.
func (c *claimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, r := range input {
		if IsClaimResource(r) {
			out = append(out, r)
		}
	}
	return out
}

// MatchingScopes: claims are in no scope.
func (c *claimEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// UncoveredQuotaScopes: claims are in no scope.
func (c *claimEvaluator) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage returns what item (a *corev1.PersistentVolumeClaim) uses.
func (c *claimEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	claim, ok := item.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expected *v1.PersistentVolumeClaim, got %T", item)
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	used := corev1.ResourceList{
		generic.ObjectCountQuotaResourceNameFor(ClaimsResource): one,
		corev1.ResourcePersistentVolumeClaims:                   one,
	}
	storage, hasStorage := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if hasStorage {
		used[corev1.ResourceRequestsStorage] = storage
	}
	if claim.Spec.StorageClassName != nil && *claim.Spec.StorageClassName != "" {
		class := *claim.Spec.StorageClassName + storageClassSuffix
		used[corev1.ResourceName(class+string(corev1.ResourcePersistentVolumeClaims))] = one
		if hasStorage {
			used[corev1.ResourceName(class+string(corev1.ResourceRequestsStorage))] = storage
		}
	}
	return used, nil
}

// UsageStats sums the namespace's claims.
func (c *claimEvaluator) UsageStats(options quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(options, c.list, generic.MatchesNoScopeFunc, c.Usage)
}
