// Package podspectest holds the QoS cases upstream Kubernetes documents ("Pod Quality of Service
// Classes"), as pods with the class each must get, so that the same table checks every place a class is
// decided: podspec.ComputeQOSClass, the status.qosClass the apiserver sets at create, and the cgroup the
// kubelet puts a pod in.
package podspectest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSCase is one pod and the QoS class it must get.
type QOSCase struct {
	Name string
	Pod  *v1.Pod
	Want v1.PodQOSClass
}

// List builds a resource list from name/quantity pairs ("cpu", "500m", "memory", "64Mi", ...); it
// panics on an odd count or an unparsable quantity (test tables only).
func List(pairs ...string) v1.ResourceList {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("podspectest.List: odd number of arguments %q", pairs))
	}
	l := v1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// Req is requirements with requests and limits (either may be nil).
func Req(requests, limits v1.ResourceList) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: requests, Limits: limits}
}

// Pod returns a pod named name with one app container per entry of app (named app-0, app-1, ...,
// image busybox:1.36) carrying those requirements.
func Pod(name string, app ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	p.Name = name
	for i, r := range app {
		p.Spec.Containers = append(p.Spec.Containers, container(fmt.Sprintf("app-%d", i), r))
	}
	return p
}

// WithInit appends init containers (init-0, ...) with those requirements; sidecar makes them
// restartable init containers (restartPolicy Always).
func WithInit(p *v1.Pod, sidecar bool, init ...v1.ResourceRequirements) *v1.Pod {
	for _, r := range init {
		c := container(fmt.Sprintf("init-%d", len(p.Spec.InitContainers)), r)
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	return p
}

// WithPodResources sets pod-level resources (spec.resources).
func WithPodResources(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
	p.Spec.Resources = &r
	return p
}

func container(name string, r v1.ResourceRequirements) v1.Container {
	return v1.Container{Name: name, Image: "busybox:1.36", Command: []string{"sleep", "3600"}, Resources: r}
}

// QOSCases returns the table, with fresh pods on every call (callers may change them).
func QOSCases() []QOSCase {
	cpuMem := func(cpu, mem string) v1.ResourceList { return List("cpu", cpu, "memory", mem) }
	none := v1.ResourceRequirements{}
	g := Req(cpuMem("500m", "64Mi"), cpuMem("500m", "64Mi"))
	return []QOSCase{
		// BestEffort: no positive cpu or memory request or limit anywhere.
		{"no resources", Pod("besteffort-none", none), v1.PodQOSBestEffort},
		{"no resources, two containers", Pod("besteffort-two", none, none), v1.PodQOSBestEffort},
		{"only an ephemeral-storage request", Pod("besteffort-ephemeral", Req(List("ephemeral-storage", "1Gi"), nil)), v1.PodQOSBestEffort},
		{"only ephemeral-storage request and limit", Pod("besteffort-ephemeral-limit", Req(List("ephemeral-storage", "1Gi"), List("ephemeral-storage", "2Gi"))), v1.PodQOSBestEffort},
		{"zero cpu and memory requests and limits", Pod("besteffort-zero", Req(cpuMem("0", "0"), cpuMem("0", "0"))), v1.PodQOSBestEffort},
		{"zero cpu and memory requests", Pod("besteffort-zero-req", Req(cpuMem("0", "0"), nil)), v1.PodQOSBestEffort},

		// Burstable: something set, but not requests == limits for cpu and memory everywhere.
		{"requests below limits", Pod("burstable-below", Req(cpuMem("250m", "32Mi"), cpuMem("500m", "64Mi"))), v1.PodQOSBurstable},
		{"requests only", Pod("burstable-requests", Req(cpuMem("250m", "32Mi"), nil)), v1.PodQOSBurstable},
		{"only a memory limit", Pod("burstable-memlimit", Req(nil, List("memory", "64Mi"))), v1.PodQOSBurstable},
		{"only a cpu request", Pod("burstable-cpureq", Req(List("cpu", "100m"), nil)), v1.PodQOSBurstable},
		{"cpu guaranteed, memory unset", Pod("burstable-cpuonly", Req(List("cpu", "1"), List("cpu", "1"))), v1.PodQOSBurstable},
		{"only some containers with limits", Pod("burstable-some", g, none), v1.PodQOSBurstable},
		{"zero cpu request below a cpu limit", Pod("burstable-zero-below", Req(cpuMem("0", "64Mi"), cpuMem("1", "64Mi"))), v1.PodQOSBurstable},

		// Guaranteed: every container requests cpu and memory at its limits.
		{"requests equal limits", Pod("guaranteed-equal", g), v1.PodQOSGuaranteed},
		{"requests equal limits, two containers", Pod("guaranteed-two", g, Req(cpuMem("1", "1Gi"), cpuMem("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"limits only, requests defaulted", Pod("guaranteed-limits", Req(nil, cpuMem("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"equal quantities written differently", Pod("guaranteed-units", Req(cpuMem("0.5", "65536Ki"), cpuMem("500m", "64Mi"))), v1.PodQOSGuaranteed},
		{"guaranteed, ephemeral-storage request below its limit", Pod("guaranteed-ephemeral", Req(
			List("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"), List("cpu", "1", "memory", "1Gi", "ephemeral-storage", "2Gi"))), v1.PodQOSGuaranteed},

		// Init containers count like app containers.
		{"guaranteed init and app containers", WithInit(Pod("init-guaranteed", g), false, g), v1.PodQOSGuaranteed},
		{"burstable init container", WithInit(Pod("init-burstable", g), false, Req(cpuMem("100m", "16Mi"), cpuMem("500m", "64Mi"))), v1.PodQOSBurstable},
		{"init container without resources", WithInit(Pod("init-none", g), false, none), v1.PodQOSBurstable},
		{"only an init container requests memory", WithInit(Pod("init-only", none), false, Req(List("memory", "16Mi"), nil)), v1.PodQOSBurstable},
		{"guaranteed sidecar", WithInit(Pod("sidecar-guaranteed", g), true, g), v1.PodQOSGuaranteed},
		{"burstable sidecar", WithInit(Pod("sidecar-burstable", g), true, Req(List("cpu", "100m"), nil)), v1.PodQOSBurstable},

		// Pod-level resources (spec.resources) decide when they set cpu, memory or hugepages.
		{"pod-level requests equal limits", WithPodResources(Pod("podlevel-equal", none), g), v1.PodQOSGuaranteed},
		{"pod-level limits only, requests defaulted", WithPodResources(Pod("podlevel-limits", none), Req(nil, cpuMem("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"pod-level requests below limits", WithPodResources(Pod("podlevel-below", g), Req(cpuMem("500m", "64Mi"), cpuMem("1", "1Gi"))), v1.PodQOSBurstable},
		{"pod-level requests only", WithPodResources(Pod("podlevel-requests", none), Req(cpuMem("1", "1Gi"), nil)), v1.PodQOSBurstable},
		{"pod-level guaranteed over containers without resources", WithPodResources(Pod("podlevel-over-none", none, none), g), v1.PodQOSGuaranteed},
		{"pod-level cpu only", WithPodResources(Pod("podlevel-cpu", none), Req(List("cpu", "1"), List("cpu", "1"))), v1.PodQOSBurstable},
		{"pod-level cpu, memory defaulted from the containers", WithPodResources(Pod("podlevel-cpu-ctr-mem", g), Req(List("cpu", "1"), List("cpu", "1"))), v1.PodQOSGuaranteed},
		{"pod-level limits, container cpu request defaults the pod's", WithPodResources(Pod("podlevel-ctr-request", Req(List("cpu", "250m"), nil)), Req(nil, cpuMem("1", "1Gi"))), v1.PodQOSBurstable},
		{"pod-level requests, container limits default the pod's", WithPodResources(Pod("podlevel-ctr-limits", Req(nil, cpuMem("500m", "64Mi"))), Req(cpuMem("500m", "64Mi"), nil)), v1.PodQOSGuaranteed},
		{"pod-level ephemeral-storage only leaves it to the containers", WithPodResources(Pod("podlevel-ephemeral", g), Req(List("ephemeral-storage", "1Gi"), nil)), v1.PodQOSGuaranteed},
	}
}
