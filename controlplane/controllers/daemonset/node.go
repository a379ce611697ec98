package daemonset

import (
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
)

// Taint keys of the tolerations every daemon pod gets (upstream AddOrUpdateDaemonPodTolerations).
const (
	taintNotReady           = "node.kubernetes.io/not-ready"
	taintUnreachable        = "node.kubernetes.io/unreachable"
	taintDiskPressure       = "node.kubernetes.io/disk-pressure"
	taintMemoryPressure     = "node.kubernetes.io/memory-pressure"
	taintPIDPressure        = "node.kubernetes.io/pid-pressure"
	taintUnschedulable      = "node.kubernetes.io/unschedulable"
	taintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// daemonTolerations are added to every daemon pod: it keeps running on a node that is not ready or
// unreachable (NoExecute, no tolerationSeconds), and is placed on nodes under disk, memory or PID
// pressure and on cordoned nodes (NoSchedule); host-network pods also tolerate network-unavailable.
func daemonTolerations(hostNetwork bool) []v1.Toleration {
	ts := []v1.Toleration{
		{Key: taintNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: taintUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: taintDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintPIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		ts = append(ts, v1.Toleration{Key: taintNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	}
	return ts
}

// addTolerations appends each of add that spec does not already carry (same key, operator, value,
// effect).
func addTolerations(spec *v1.PodSpec, add []v1.Toleration) {
	for _, t := range add {
		found := false
		for _, have := range spec.Tolerations {
			if have.MatchToleration(&t) {
				found = true
				break
			}
		}
		if !found {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// newPod returns the daemon pod of ds for node: the template (labels plus the controller-revision-hash
// hash), the daemon tolerations, and required node affinity matchFields metadata.name=<node> so the
// scheduler binds it to that node (upstream since 1.12), under a controller ownerReference.
func newPod(ds *appsv1.DaemonSet, node, hash string) *v1.Pod {
	pod := podutil.FromTemplate(&ds.Spec.Template, ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
	pod.GenerateName = ds.Name + "-"
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	addTolerations(&pod.Spec, daemonTolerations(pod.Spec.HostNetwork))
	setNodeAffinity(&pod.Spec, node)
	return pod
}

// setNodeAffinity makes every required node selector term of spec match only node, by replacing its
// matchFields with metadata.name In [node] (upstream ReplaceDaemonSetPodNodeNameNodeAffinity); the
// terms' matchExpressions stay.
func setNodeAffinity(spec *v1.PodSpec, node string) {
	req := v1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &v1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{req}}}}
		return
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchFields = []v1.NodeSelectorRequirement{req}
	}
}

// targetNode is the node a daemon pod is for: spec.nodeName once bound, else the node its
// matchFields affinity names ("" when neither).
func targetNode(p *v1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == v1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// placement answers upstream's NodeShouldRunDaemonPod for one node: shouldRun when a new daemon pod
// belongs there (nodeSelector and required node affinity match, every NoSchedule and NoExecute taint
// tolerated); shouldContinueRunning when an existing one may stay (only NoExecute taints count, since
// NoSchedule does not evict).
func placement(ds *appsv1.DaemonSet, node *v1.Node) (shouldRun, shouldContinueRunning bool) {
	pod := newPod(ds, node.Name, "")
	if match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !match {
		return false, false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }, false)
	if untolerated {
		return false, false
	}
	_, untolerated = corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoSchedule }, false)
	return !untolerated, true
}
