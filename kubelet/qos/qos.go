// Package qos computes a pod's Quality of Service class (Kubernetes "Pod Quality of Service Classes":
// Guaranteed, Burstable, BestEffort) from the cpu and memory requests and limits of its containers.
package qos

import (
	v1 "k8s.io/api/core/v1"
)

// Class returns the pod's QoS class: BestEffort when no container (init or app) sets a cpu or memory
// request or limit; Guaranteed when every container sets cpu and memory limits and its requests (when
// given) equal them; Burstable otherwise. Pod-level resources, when set, take the place of the
// containers' for the same rules.
func Class(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return compute(pod)
}

func compute(pod *v1.Pod) v1.PodQOSClass {
	supported := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	if pr := pod.Spec.Resources; pr != nil && (len(pr.Requests) > 0 || len(pr.Limits) > 0) {
		return classify([]v1.ResourceRequirements{*pr}, supported)
	}
	var all []v1.ResourceRequirements
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Resources)
	}
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Resources)
	}
	return classify(all, supported)
}

func classify(reqs []v1.ResourceRequirements, names []v1.ResourceName) v1.PodQOSClass {
	anySet := false
	guaranteed := true
	for _, r := range reqs {
		for _, n := range names {
			req, hasReq := r.Requests[n]
			lim, hasLim := r.Limits[n]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				anySet = true
			}
			if !hasLim || lim.IsZero() {
				guaranteed = false
				continue
			}
			if hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !anySet:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}
