package scheduler

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// node returns a Ready node with cpu (e.g. "4"), memory (e.g. "8Gi") and 110 pods allocatable.
func node(name, cpu, memory string, mutate ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(cpu),
				v1.ResourceMemory: resource.MustParse(memory),
				v1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	for _, m := range mutate {
		m(n)
	}
	return n
}

// pod returns a pod with one container requesting cpu and memory ("" leaves the request out).
func pod(name, cpu, memory string, mutate ...func(*v1.Pod)) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[v1.ResourceMemory] = resource.MustParse(memory)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			SchedulerName: DefaultSchedulerName,
			Containers:    []v1.Container{{Name: "c", Image: "demo", Resources: v1.ResourceRequirements{Requests: req}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func ownedBy(uid string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: &t}}
	}
}

func boundTo(nodeName string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.NodeName = nodeName } }

// infoFor builds a nodeInfo for n holding the given (bound) pods.
func infoFor(n *v1.Node, pods ...*v1.Pod) *nodeInfo {
	ni := newNodeInfo()
	ni.Node = n
	for i, p := range pods {
		ni.addPod(fmt.Sprintf("%s/%s-%d", p.Namespace, p.Name, i), newPodInfo(p))
	}
	return ni
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }
