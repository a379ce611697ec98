package podspec

import (
	v1 "k8s.io/api/core/v1"
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
