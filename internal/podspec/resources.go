package podspec

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// effectiveResources sums what the pod's containers need of each resource at the same time,
// as upstream's resource helpers (k8s.io/component-helpers/resource) aggregate container requests or
// limits; of returns one container's list (its requests or its limits). App containers and restartable
// init containers (sidecars, restartPolicy Always) run together, so they add up; each regular init
// container runs alone after the sidecars declared before it, so it needs its own amount plus theirs.
// The result is, per resource, the larger of the two. Pod-level resources and overhead are not included.
func effectiveResources(pod *v1.Pod, of func(*v1.ResourceRequirements) v1.ResourceList) v1.ResourceList {
	running := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		add(running, of(&pod.Spec.Containers[i].Resources))
	}
	sidecars, initPeak := v1.ResourceList{}, v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		own := of(&c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(running, own)
			add(sidecars, own)
			raise(initPeak, sidecars)
			continue
		}
		step := v1.ResourceList{}
		add(step, own)
		add(step, sidecars)
		raise(initPeak, step)
	}
	raise(running, initPeak)
	return running
}

// add adds every quantity of from to sum.
func add(sum, from v1.ResourceList) {
	for name, q := range from {
		s := sum[name].DeepCopy()
		s.Add(q)
		sum[name] = s
	}
}

// raise sets each of to's quantities to from's where from's is larger or to lacks the resource.
func raise(to, from v1.ResourceList) {
	for name, q := range from {
		if cur, ok := to[name]; !ok || q.Cmp(cur) > 0 {
			to[name] = q.DeepCopy()
		}
	}
}

// PodResources returns what the pod cgroup is sized from, as upstream's ResourceConfigForPod computes
// it: per resource the pod-level request (spec.resources) or else the effective sum of the containers'
// requests (a limit without a request counts as the request), and a limit only where the pod sets one
// at pod level or every init and app container sets one (the effective sum of the limits, at least the
// request). Overhead is not included.
func PodResources(pod *v1.Pod) (requests, limits v1.ResourceList) {
	if podLevelResourcesSet(pod) {
		return podLevelResources(pod)
	}
	requests = effectiveResources(pod, containerRequests)
	ctrLims := effectiveResources(pod, func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits })
	limits = v1.ResourceList{}
	for name, lim := range ctrLims {
		if !everyContainerSets(pod, name) {
			continue
		}
		if req, ok := requests[name]; ok && req.Cmp(lim) > 0 {
			lim = req
		}
		limits[name] = lim
	}
	return requests, limits
}

// IsNativeResource reports whether r is in the kubernetes.io namespace: unprefixed names (cpu, memory)
// and names under kubernetes.io/ are (upstream's IsNativeResource).
func IsNativeResource(r v1.ResourceName) bool {
	return !strings.Contains(string(r), "/") || strings.Contains(string(r), v1.ResourceDefaultNamespacePrefix)
}

// IsExtendedResourceName reports whether r is an extended resource (example.com/gpu): not native, not
// a requests.-prefixed quota name, and a qualified name once prefixed with "requests." (upstream's
// IsExtendedResourceName).
func IsExtendedResourceName(r v1.ResourceName) bool {
	if IsNativeResource(r) || strings.HasPrefix(string(r), v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+string(r))) == 0
}
