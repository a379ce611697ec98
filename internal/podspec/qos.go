package podspec

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// qosResources are the resources that decide the QoS class; every other one (ephemeral-storage,
// hugepages, extended resources) is ignored.
var qosResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// QOSClass returns the pod's QoS class as the API recorded it in status.qosClass at creation, or
// ComputeQOSClass when the status carries none (a static pod, a pod not yet stored).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass computes the pod's QoS class from its spec, as Kubernetes defines it ("Pod Quality of
// Service Classes"; upstream pkg/apis/core/v1/helper/qos ComputePodQOS): only cpu and memory count, and
// only positive quantities.
//
// When the pod sets pod-level resources (spec.resources with a cpu, memory or hugepages entry), they
// alone decide: Guaranteed when the pod's cpu and memory requests equal its limits and are positive,
// BestEffort when both are zero or unset, Burstable otherwise. Pod-level requests and limits the pod
// leaves unset take the values upstream's defaulting gives them: a request is the containers' effective
// request of that resource when one sets it, else the pod-level limit; a limit is the largest of the
// pod-level request and the containers' effective limit when every container sets that limit.
//
// Otherwise every init and app container is classified alike (a limit without a request counts as a
// request equal to it, as container defaulting sets it) and the pod is Guaranteed when all containers
// are, BestEffort when all are, Burstable otherwise.
func ComputeQOSClass(pod *v1.Pod) v1.PodQOSClass {
	if podLevelResourcesSet(pod) {
		req, lim := podLevelResources(pod)
		return requirementsClass(req, lim)
	}
	var class v1.PodQOSClass
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r := &list[i].Resources
			class = join(class, requirementsClass(containerRequests(r), r.Limits))
			if class == v1.PodQOSBurstable {
				return class
			}
		}
	}
	if class == "" {
		return v1.PodQOSBestEffort
	}
	return class
}

// requirementsClass classifies one set of requests and limits by their cpu and memory: Guaranteed when
// both are requested, positive and equal to their limits; BestEffort when neither has a positive request
// or limit; Burstable otherwise.
func requirementsClass(requests, limits v1.ResourceList) v1.PodQOSClass {
	var class v1.PodQOSClass
	for _, name := range qosResources {
		req, lim := requests[name], limits[name]
		switch {
		case req.Cmp(lim) != 0:
			class = join(class, v1.PodQOSBurstable)
		case req.Sign() <= 0:
			class = join(class, v1.PodQOSBestEffort)
		default:
			class = join(class, v1.PodQOSGuaranteed)
		}
	}
	return class
}

// join combines the classes of two parts of a pod: the same class stays, any mix is Burstable; "" is
// the class of nothing.
func join(a, b v1.PodQOSClass) v1.PodQOSClass {
	switch {
	case a == "":
		return b
	case a == b:
		return a
	}
	return v1.PodQOSBurstable
}

// containerRequests is a container's requests as defaulting completes them: a resource with a limit and
// no request is requested at its limit.
func containerRequests(r *v1.ResourceRequirements) v1.ResourceList {
	out := make(v1.ResourceList, len(r.Requests)+len(r.Limits))
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}

// isPodLevelResource reports whether spec.resources may set name: cpu, memory and hugepages-<size>.
func isPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// podLevelResourcesSet reports whether the pod sets a pod-level request or limit of a resource that
// pod-level resources support.
func podLevelResourcesSet(pod *v1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, list := range []v1.ResourceList{r.Requests, r.Limits} {
		for name := range list {
			if isPodLevelResource(name) {
				return true
			}
		}
	}
	return false
}

// podLevelResources returns the pod-level cpu and memory requests and limits, the unset ones defaulted
// as upstream's apiserver does at create (see ComputeQOSClass).
func podLevelResources(pod *v1.Pod) (requests, limits v1.ResourceList) {
	r := pod.Spec.Resources
	requests, limits = v1.ResourceList{}, v1.ResourceList{}
	ctrReqs := effectiveResources(pod, containerRequests)
	ctrLims := effectiveResources(pod, func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits })
	for _, name := range qosResources {
		req, hasReq := r.Requests[name]
		if !hasReq {
			req, hasReq = ctrReqs[name]
		}
		if !hasReq {
			req, hasReq = r.Limits[name]
		}
		if hasReq {
			requests[name] = req
		}
		if lim, ok := r.Limits[name]; ok {
			limits[name] = lim
		} else if hasReq && everyContainerSets(pod, name) {
			lim := ctrLims[name]
			if req.Cmp(lim) > 0 {
				lim = req
			}
			limits[name] = lim
		}
	}
	return requests, limits
}

// everyContainerSets reports whether every init and app container sets a limit on name.
func everyContainerSets(pod *v1.Pod, name v1.ResourceName) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if _, ok := list[i].Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}
