// Package quota holds the ResourceQuota evaluators that both the API server's ResourceQuota admission
// plugin and the resource quota controller use, so that what admission charges and what the controller
// recalculates are the same numbers (kube-apiserver and kube-controller-manager share
// k8s.io/kubernetes/pkg/quota/v1/install the same way). The evaluators implement
// k8s.io/apiserver/pkg/quota/v1.Evaluator:
//
//   - pods: the pod evaluator of this package (pods.go): pods, count/pods, cpu, memory,
//     ephemeral-storage, requests.*, limits.*, hugepages and extended-resource requests, with the scopes
//     Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass and CrossNamespacePodAffinity;
//   - services: services, count/services, services.nodeports, services.loadbalancers (services.go);
//   - persistentvolumeclaims: nodekit serves no PersistentVolumeClaims, so the claim resources
//     (persistentvolumeclaims, requests.storage, <class>.storageclass.storage.k8s.io/...) are always
//     zero (claims.go);
//   - configmaps, secrets, replicationcontrollers, resourcequotas: k8s.io/apiserver's generic object
//     count evaluators with the legacy names as aliases (count/configmaps and configmaps, ...).
//
// Every other count/<resource>.<group> is counted by a generic object count evaluator made on demand
// (the admission plugin does so itself; the controller adds one per resource it discovers).
package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

// legacyCounts are the object-count resources that also have a legacy (unprefixed) quota name.
var legacyCounts = map[schema.GroupResource]corev1.ResourceName{
	corev1.Resource("configmaps"):             corev1.ResourceConfigMaps,
	corev1.Resource("secrets"):                corev1.ResourceSecrets,
	corev1.Resource("replicationcontrollers"): corev1.ResourceReplicationControllers,
	corev1.Resource("resourcequotas"):         corev1.ResourceQuotas,
}

// Evaluators returns the static evaluators. listers gives each evaluator the lister it computes usage
// stats from (the controller's informers); admission, which only charges single objects, passes nil,
// as kube-apiserver does.
func Evaluators(listers quotav1.ListerForResourceFunc) []quotav1.Evaluator {
	evals := []quotav1.Evaluator{NewPodEvaluator(listers), NewServiceEvaluator(listers), claimEvaluator{}}
	for gr, alias := range legacyCounts {
		evals = append(evals, generic.NewObjectCountEvaluator(gr, listFunc(listers, gr.WithVersion("v1")), alias))
	}
	return evals
}

// Configuration returns the quota configuration over Evaluators(listers), ignoring the resources
// kube-apiserver's quota ignores (IgnoredResources).
func Configuration(listers quotav1.ListerForResourceFunc) quotav1.Configuration {
	return generic.NewConfiguration(Evaluators(listers), IgnoredResources())
}

// IgnoredResources returns the resources quota never counts: requests that store nothing (reviews,
// bindings) and events, as upstream's DefaultIgnoredResources.
func IgnoredResources() map[schema.GroupResource]struct{} {
	return map[schema.GroupResource]struct{}{
		corev1.Resource("bindings"):                                            {},
		corev1.Resource("componentstatuses"):                                   {},
		corev1.Resource("events"):                                              {},
		{Group: "events.k8s.io", Resource: "events"}:                           {},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
		{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
	}
}

// listFunc returns the namespace listing of gvr through listers; without listers (admission) it fails,
// since usage stats are the controller's job.
func listFunc(listers quotav1.ListerForResourceFunc, gvr schema.GroupVersionResource) generic.ListFuncByNamespace {
	if listers == nil {
		return func(string) ([]runtime.Object, error) {
			return nil, fmt.Errorf("quota: no lister for %s (usage stats are computed by the controller)", gvr)
		}
	}
	return generic.ListResourceUsingListerFunc(listers, gvr)
}

// static are the evaluators without listers, for Counted.
var static = Evaluators(nil)

// Counted reports whether some evaluator of this package, or the generic object count evaluator
// (count/<resource>[.<group>]), measures the quota resource name; a quota naming anything else would
// limit nothing.
func Counted(name corev1.ResourceName) bool {
	if strings.HasPrefix(string(name), "count/") {
		return true
	}
	names := []corev1.ResourceName{name}
	for _, e := range static {
		if len(e.MatchingResources(names)) > 0 {
			return true
		}
	}
	return false
}
