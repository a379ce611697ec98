package scheduler

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Filter failure reasons, worded as the upstream scheduler plugins word them so that operators and
// tools reading PodScheduled messages see the familiar text.
const (
	ReasonNodeNotFound      = "node(s) not found"
	ReasonNodeNotReady      = "node(s) were not ready"
	ReasonUnschedulable     = "node(s) were unschedulable"
	ReasonNodeName          = "node(s) didn't match the requested node name"
	ReasonNodeAffinity      = "node(s) didn't match Pod's node affinity/selector"
	ReasonNodePorts         = "node(s) didn't have free ports for the requested pod ports"
	ReasonTooManyPods       = "Too many pods"
	reasonInsufficientFmt   = "Insufficient %s"
	reasonUntoleratedTaint  = "node(s) had untolerated taint {%s: %s}"
	taintNodeUnschedulable  = "node.kubernetes.io/unschedulable"
	defaultMaxPodsIfMissing = 0
)

// filterFunc checks one property of a node for a pod and returns the reasons it fails (nil: it fits).
type filterFunc func(pi *podInfo, ni *nodeInfo) []string

// filter is a named filter plugin.
type filter struct {
	Name string
	Fn   filterFunc
}

// filters returns the filter plugins in the order upstream's default profile runs them; a node is
// rejected by the first plugin that fails, as in the scheduling framework.
func filters(logger logr.Logger) []filter {
	return []filter{
		{"NodeReady", filterNodeReady},
		{"NodeUnschedulable", func(pi *podInfo, ni *nodeInfo) []string { return filterNodeUnschedulable(logger, pi, ni) }},
		{"NodeName", filterNodeName},
		{"TaintToleration", func(pi *podInfo, ni *nodeInfo) []string { return filterTaints(logger, pi, ni) }},
		{"NodeAffinity", filterNodeAffinity},
		{"NodePorts", filterNodePorts},
		{"NodeResourcesFit", filterResources},
	}
}

// cycleFilters returns fs followed by the filters whose state is computed once per cycle over the
// whole cluster, in upstream's order (PodTopologySpread, then InterPodAffinity, after
// NodeResourcesFit); a plugin with nothing to check for this pod is left out. The error explains a pod
// whose affinity terms or spread constraints do not parse.
func cycleFilters(fs []filter, cc *cycleContext) ([]filter, error) {
	if cc.pod.AffinityErr != nil {
		return nil, cc.pod.AffinityErr
	}
	out := fs[:len(fs):len(fs)]
	spread, err := newSpreadFilter(cc)
	if err != nil {
		return nil, err
	}
	if spread != nil {
		out = append(out, filter{"PodTopologySpread", spread.filter})
	}
	if aff := newAffinityFilter(cc); aff != nil {
		out = append(out, filter{"InterPodAffinity", aff.filter})
	}
	return out, nil
}

// runFilters returns nil when the node fits the pod, otherwise the failing plugin's reasons.
func runFilters(fs []filter, pi *podInfo, ni *nodeInfo) []string {
	if ni.Node == nil {
		return []string{ReasonNodeNotFound}
	}
	for _, f := range fs {
		if reasons := f.Fn(pi, ni); len(reasons) > 0 {
			return reasons
		}
	}
	return nil
}

// filterNodeReady rejects nodes whose Ready condition is not True (NotReady or Unknown).
func filterNodeReady(_ *podInfo, ni *nodeInfo) []string {
	for _, c := range ni.Node.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return nil
			}
			break
		}
	}
	return []string{ReasonNodeNotReady}
}

// filterNodeUnschedulable rejects cordoned nodes (spec.unschedulable) unless the pod tolerates the
// node.kubernetes.io/unschedulable:NoSchedule taint (upstream NodeUnschedulable plugin).
func filterNodeUnschedulable(logger logr.Logger, pi *podInfo, ni *nodeInfo) []string {
	if !ni.Node.Spec.Unschedulable {
		return nil
	}
	taint := v1.Taint{Key: taintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if corev1helpers.TolerationsTolerateTaint(logger, pi.Pod.Spec.Tolerations, &taint, false) {
		return nil
	}
	return []string{ReasonUnschedulable}
}

// filterNodeName rejects every node but the one named by spec.nodeName, when the pod names one.
func filterNodeName(pi *podInfo, ni *nodeInfo) []string {
	if pi.Pod.Spec.NodeName != "" && pi.Pod.Spec.NodeName != ni.Node.Name {
		return []string{ReasonNodeName}
	}
	return nil
}

// filterTaints rejects a node with a NoSchedule or NoExecute taint the pod does not tolerate
// (PreferNoSchedule only affects scoring upstream).
func filterTaints(logger logr.Logger, pi *podInfo, ni *nodeInfo) []string {
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, ni.Node.Spec.Taints, pi.Pod.Spec.Tolerations,
		doNotScheduleTaint, false)
	if untolerated {
		return []string{fmt.Sprintf(reasonUntoleratedTaint, taint.Key, taint.Value)}
	}
	return nil
}

// doNotScheduleTaint selects the taints that keep pods off a node: NoSchedule and NoExecute.
func doNotScheduleTaint(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

// filterNodeAffinity applies spec.nodeSelector and requiredDuringSchedulingIgnoredDuringExecution
// node affinity together, as upstream's NodeAffinity plugin does.
func filterNodeAffinity(pi *podInfo, ni *nodeInfo) []string {
	match, err := nodeaffinity.GetRequiredNodeAffinity(pi.Pod).Match(ni.Node)
	if err != nil || !match {
		return []string{ReasonNodeAffinity}
	}
	return nil
}

// filterNodePorts rejects a node where a host port the pod wants is already claimed by another pod.
func filterNodePorts(pi *podInfo, ni *nodeInfo) []string {
	if len(pi.HostPorts) == 0 {
		return nil
	}
	for _, other := range ni.Pods {
		if podspec.HostPortsConflict(pi.HostPorts, other.HostPorts) {
			return []string{ReasonNodePorts}
		}
	}
	return nil
}

// filterResources compares the pod's requests with the node's allocatable minus the requests of the
// pods already on it, and the pod count with allocatable pods. It returns every insufficient resource.
func filterResources(pi *podInfo, ni *nodeInfo) []string {
	var reasons []string
	alloc := ni.Node.Status.Allocatable
	maxPods := int64(defaultMaxPodsIfMissing)
	if q, ok := alloc[v1.ResourcePods]; ok {
		maxPods = q.Value()
	}
	if int64(len(ni.Pods))+1 > maxPods {
		reasons = append(reasons, ReasonTooManyPods)
	}
	a := resourcesFromList(alloc)
	req, used := pi.Requests, ni.Requested
	if req.MilliCPU > 0 && req.MilliCPU > a.MilliCPU-used.MilliCPU {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficientFmt, v1.ResourceCPU))
	}
	if req.Memory > 0 && req.Memory > a.Memory-used.Memory {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficientFmt, v1.ResourceMemory))
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > a.EphemeralStorage-used.EphemeralStorage {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficientFmt, v1.ResourceEphemeralStorage))
	}
	for _, name := range slices.Sorted(maps.Keys(req.Scalar)) {
		if req.Scalar[name] > a.Scalar[name]-used.Scalar[name] {
			reasons = append(reasons, fmt.Sprintf(reasonInsufficientFmt, name))
		}
	}
	return reasons
}
