package scheduler

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"

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

func ownedBy(rs string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("uid-" + rs), Controller: &t}}
	}
}

// withLabels sets the pod's labels from key, value pairs.
func withLabels(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func inNamespace(ns string) func(*v1.Pod) { return func(p *v1.Pod) { p.Namespace = ns } }

// zone labels a node with topology.kubernetes.io/zone.
func zone(z string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[v1.LabelTopologyZone] = z }
}

// term is a pod affinity term selecting pods with the given labels (key, value pairs) in topologyKey.
func term(topologyKey string, kv ...string) v1.PodAffinityTerm {
	ml := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		ml[kv[i]] = kv[i+1]
	}
	return v1.PodAffinityTerm{TopologyKey: topologyKey, LabelSelector: &metav1.LabelSelector{MatchLabels: ml}}
}

func ensureAffinity(p *v1.Pod) *v1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if p.Spec.Affinity.PodAffinity == nil {
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{}
	}
	if p.Spec.Affinity.PodAntiAffinity == nil {
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	return p.Spec.Affinity
}

// requiredAffinity and requiredAnti add required pod affinity / anti-affinity terms.
func requiredAffinity(terms ...v1.PodAffinityTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		a := ensureAffinity(p).PodAffinity
		a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	}
}

func requiredAnti(terms ...v1.PodAffinityTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		a := ensureAffinity(p).PodAntiAffinity
		a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	}
}

// preferredAffinity and preferredAnti add a weighted preferred term.
func preferredAffinity(weight int32, t v1.PodAffinityTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		a := ensureAffinity(p).PodAffinity
		a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	}
}

func preferredAnti(weight int32, t v1.PodAffinityTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		a := ensureAffinity(p).PodAntiAffinity
		a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	}
}

// spread adds a topology spread constraint selecting pods with the given labels (key, value pairs).
func spread(maxSkew int32, key string, action v1.UnsatisfiableConstraintAction, mutate func(*v1.TopologySpreadConstraint), kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		ml := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			ml[kv[i]] = kv[i+1]
		}
		c := v1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: action,
			LabelSelector: &metav1.LabelSelector{MatchLabels: ml}}
		if mutate != nil {
			mutate(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

// fakeLookups answers lookups from fixed data: namespace labels by name and the default spreading
// selector of every pod (nil: nothing selects it).
type fakeLookups struct {
	namespaces     map[string]labels.Set
	spreadSelector labels.Selector
}

func (f *fakeLookups) namespaceLabels(ns string) labels.Set { return f.namespaces[ns] }

func (f *fakeLookups) namespacesMatching(sel labels.Selector) []string {
	var names []string
	for name, l := range f.namespaces {
		if sel.Matches(l) {
			names = append(names, name)
		}
	}
	return names
}

func (f *fakeLookups) defaultSpreadSelector(*v1.Pod) labels.Selector {
	if f.spreadSelector == nil {
		return labels.Everything() // empty: no default constraints
	}
	return f.spreadSelector
}

// cycleFor builds a cycle for p over nodes (nil lookups: no namespaces, no default spreading).
func cycleFor(p *v1.Pod, lk *fakeLookups, nodes ...*nodeInfo) *cycleContext {
	if lk == nil {
		lk = &fakeLookups{}
	}
	return &cycleContext{pod: newPodInfo(p), nodes: nodes, lookups: lk, logger: logr.Discard()}
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
