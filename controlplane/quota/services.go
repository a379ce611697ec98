package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var (
	servicesResource = corev1.Resource("services")
	serviceNames     = []corev1.ResourceName{generic.ObjectCountQuotaResourceNameFor(servicesResource),
		corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers}
)

// ServiceEvaluator charges Services: each counts once in services and count/services; a NodePort
// Service uses one services.nodeports per port, a LoadBalancer one services.loadbalancers and one node
// port per port (or, with allocateLoadBalancerNodePorts false, per port that has a nodePort), as
// upstream's service evaluator. Creates and updates (a type change) are charged.
type ServiceEvaluator struct {
	list generic.ListFuncByNamespace
}

// NewServiceEvaluator returns the service evaluator; listers may be nil (admission).
func NewServiceEvaluator(listers quotav1.ListerForResourceFunc) *ServiceEvaluator {
	return &ServiceEvaluator{list: listFunc(listers, servicesResource.WithVersion("v1"))}
}

var _ quotav1.Evaluator = &ServiceEvaluator{}

// GroupResource is core/v1 services.
func (s *ServiceEvaluator) GroupResource() schema.GroupResource { return servicesResource }

// Constraints puts no per-object requirement.
func (s *ServiceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Handles creates and updates of the Service itself.
func (s *ServiceEvaluator) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update)
}

// Matches reports whether quota tracks a service resource (services have no scopes).
func (s *ServiceEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, s.MatchingResources, generic.MatchesNoScopeFunc)
}

// MatchingResources returns the service names among input.
func (s *ServiceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quotav1.Intersection(input, serviceNames)
}

// MatchingScopes: services are in no scope.
func (s *ServiceEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// UncoveredQuotaScopes: services are in no scope.
func (s *ServiceEvaluator) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage returns what item (a *corev1.Service) uses.
func (s *ServiceEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	svc, ok := item.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("expected *v1.Service, got %T", item)
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	nodePorts, lbs := int64(0), int64(0)
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		nodePorts = int64(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		lbs = 1
		nodePorts = int64(len(svc.Spec.Ports))
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			nodePorts = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					nodePorts++
				}
			}
		}
	}
	return corev1.ResourceList{
		serviceNames[0]:                      one,
		corev1.ResourceServices:              one,
		corev1.ResourceServicesNodePorts:     *resource.NewQuantity(nodePorts, resource.DecimalSI),
		corev1.ResourceServicesLoadBalancers: *resource.NewQuantity(lbs, resource.DecimalSI),
	}, nil
}

// UsageStats sums the namespace's Services.
func (s *ServiceEvaluator) UsageStats(options quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(options, s.list, generic.MatchesNoScopeFunc, s.Usage)
}
