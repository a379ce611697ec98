package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/podspec"
)

var (
	podsResource  = corev1.Resource("pods")
	podCountName  = generic.ObjectCountQuotaResourceNameFor(podsResource)
	podComputeSet = []corev1.ResourceName{
		podCountName, corev1.ResourcePods,
		corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	}
	// constrained are the resources a quota that names them requires every container to declare
	// (upstream's validation set): a container without a cpu request under a requests.cpu quota is refused.
	constrained = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceRequestsCPU,
		corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory)
)

// PodEvaluator charges pods against quota as kube-apiserver's pod evaluator does. A pod counts once in
// count/pods for as long as it exists; its compute resources and `pods` count only while it is not
// terminal (phase Succeeded or Failed) and not past its deletion grace period. Compute usage is the
// pod's effective requests and limits (k8s.io/component-helpers/resource: init containers, sidecars,
// pod-level resources and overhead as the scheduler sums them).
type PodEvaluator struct {
	list generic.ListFuncByNamespace
	// Now is the clock for deletion grace periods (default time.Now).
	Now func() time.Time
}

// NewPodEvaluator returns the pod evaluator; listers may be nil (admission).
func NewPodEvaluator(listers quotav1.ListerForResourceFunc) *PodEvaluator {
	return &PodEvaluator{list: listFunc(listers, podsResource.WithVersion("v1")), Now: time.Now}
}

var _ quotav1.Evaluator = &PodEvaluator{}

// GroupResource is core/v1 pods.
func (p *PodEvaluator) GroupResource() schema.GroupResource { return podsResource }

// Handles: pod creation, an update that changes whether the pod is Terminating
// (activeDeadlineSeconds), and a resize.
func (p *PodEvaluator) Handles(a admission.Attributes) bool {
	switch a.GetSubresource() {
	case "":
		if a.GetOperation() == admission.Update {
			pod, err1 := asPod(a.GetObject())
			old, err2 := asPod(a.GetOldObject())
			return err1 == nil && err2 == nil && terminating(pod) != terminating(old)
		}
		return a.GetOperation() == admission.Create
	case "resize":
		return a.GetOperation() == admission.Update
	}
	return false
}

// Constraints refuses a pod one of whose containers leaves out a cpu or memory request or limit that
// required (the quota's hard resources) names, with upstream's message ("must specify requests.cpu for:
// c1,c2; ..."). Pods with pod-level resources are not constrained per container.
func (p *PodEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, err := asPod(item)
	if err != nil {
		return err
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	need := sets.New(required...).Intersection(constrained)
	missing := map[corev1.ResourceName]sets.Set[string]{}
	check := func(c *corev1.Container) {
		has := sets.KeySet(computeUsage(c.Resources.Requests, c.Resources.Limits))
		for _, r := range need.Difference(has).UnsortedList() {
			if missing[r] == nil {
				missing[r] = sets.New[string]()
			}
			missing[r].Insert(c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	var msgs []string
	for _, r := range sets.List(sets.KeySet(missing)) {
		msgs = append(msgs, fmt.Sprintf("%s for: %s", r, strings.Join(sets.List(missing[r]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

// Matches reports whether quota tracks a resource of pods and item is in all of its scopes.
func (p *PodEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, p.MatchingResources, podMatchesScope)
}

// MatchingResources returns the names of input the pod evaluator counts: the compute and count names,
// hugepages-* and requests.hugepages-*, and requests of extended resources (requests.example.com/gpu).
func (p *PodEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	result := quotav1.Intersection(input, podComputeSet)
	for _, r := range input {
		if strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix) ||
			strings.HasPrefix(string(r), corev1.ResourceRequestsHugePagesPrefix) || extendedQuotaName(r) {
			result = append(result, r)
		}
	}
	return result
}

// MatchingScopes returns the selectors of scopes that item is in.
func (p *PodEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	matched := []corev1.ScopedResourceSelectorRequirement{}
	for _, s := range scopes {
		ok, err := podMatchesScope(s, item)
		if err != nil {
			return nil, fmt.Errorf("error on matching scope %v: %w", s, err)
		}
		if ok {
			matched = append(matched, s)
		}
	}
	return matched, nil
}

// UncoveredQuotaScopes returns the limited scopes no matched quota scope of the same name covers.
func (p *PodEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	uncovered := []corev1.ScopedResourceSelectorRequirement{}
	for _, l := range limited {
		if !slices.ContainsFunc(matched, func(m corev1.ScopedResourceSelectorRequirement) bool { return m.ScopeName == l.ScopeName }) {
			uncovered = append(uncovered, l)
		}
	}
	return uncovered, nil
}

// Usage returns what item (a *corev1.Pod) uses.
func (p *PodEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pod, err := asPod(item)
	if err != nil {
		return nil, err
	}
	usage := corev1.ResourceList{podCountName: *resource.NewQuantity(1, resource.DecimalSI)}
	if !p.charged(pod) {
		return usage, nil
	}
	opts := resourcehelper.PodResourcesOptions{}
	return quotav1.Add(usage, computeUsage(resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))), nil
}

// UsageStats sums the usage of the namespace's pods in the options' scopes.
func (p *PodEvaluator) UsageStats(options quotav1.UsageStatsOptions) (quotav1.UsageStats, error) {
	return generic.CalculateUsageStats(options, p.list, podMatchesScope, p.Usage)
}

// charged reports whether pod's compute resources count: not terminal, and not past the end of its
// deletion grace period.
func (p *PodEvaluator) charged(pod *corev1.Pod) bool {
	if podspec.IsTerminal(pod.Status.Phase) {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if p.Now().After(end) {
			return false
		}
	}
	return true
}

// computeUsage maps requests and limits (of a pod or a container) to quota names: cpu, memory and
// ephemeral-storage requests count under both their bare and requests.* names, limits under limits.*,
// hugepages requests under both names, and extended resources under requests.<name>. A pod always adds
// pods=1.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := requests[r]; ok {
			out[r] = q
			out[corev1.DefaultResourceRequestsPrefix+r] = q
		}
		if q, ok := limits[r]; ok {
			out[corev1.ResourceName("limits.")+r] = q
		}
	}
	for r, q := range requests {
		switch {
		case strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix):
			out[r] = q
			out[corev1.DefaultResourceRequestsPrefix+r] = q
		case podspec.IsExtendedResourceName(r):
			out[corev1.DefaultResourceRequestsPrefix+r] = q
		}
	}
	return out
}

// extendedQuotaName reports whether r is the quota name of an extended resource request
// (requests.example.com/gpu).
func extendedQuotaName(r corev1.ResourceName) bool {
	return strings.HasPrefix(string(r), corev1.DefaultResourceRequestsPrefix) && !podspec.IsNativeResource(r)
}

// terminating reports whether pod is in the Terminating scope: it has activeDeadlineSeconds >= 0.
func terminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// podMatchesScope reports whether the pod object is in the scope selector s.
func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error) {
	pod, err := asPod(object)
	if err != nil {
		return false, err
	}
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return podspec.QOSClass(pod) == corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return podspec.QOSClass(pod) != corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		return priorityClassMatches(pod, s)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// priorityClassMatches evaluates an In/NotIn/DoesNotExist PriorityClass selector against the pod's
// priorityClassName, as a label selector on the key PriorityClass.
func priorityClassMatches(pod *corev1.Pod, s corev1.ScopedResourceSelectorRequirement) (bool, error) {
	var op selection.Operator
	switch s.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	req, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	set := labels.Set{}
	if pod.Spec.PriorityClassName != "" {
		set[string(corev1.ResourceQuotaScopePriorityClass)] = pod.Spec.PriorityClassName
	}
	return labels.NewSelector().Add(*req).Matches(set), nil
}

// crossNamespaceAffinity reports whether a pod (anti-)affinity term of pod names other namespaces
// (namespaces or namespaceSelector set).
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	if pod.Spec.Affinity == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a := pod.Spec.Affinity.PodAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a := pod.Spec.Affinity.PodAntiAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	return slices.ContainsFunc(terms, func(t corev1.PodAffinityTerm) bool { return len(t.Namespaces) > 0 || t.NamespaceSelector != nil })
}

func asPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expected *v1.Pod, got %T", obj)
	}
	return pod, nil
}
