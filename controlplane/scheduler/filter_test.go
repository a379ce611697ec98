package scheduler

import (
	"slices"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
)

func TestFilters(t *testing.T) {
	logger := logr.Discard()
	cases := []struct {
		name   string
		fn     filterFunc
		pod    *v1.Pod
		node   *nodeInfo
		reject []string // nil: the node fits
	}{
		{"ready node fits", filterNodeReady, pod("p", "", ""), infoFor(node("n", "1", "1Gi")), nil},
		{"not ready node rejected", filterNodeReady, pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
			n.Status.Conditions[0].Status = v1.ConditionUnknown
		})), []string{ReasonNodeNotReady}},
		{"node without Ready condition rejected", filterNodeReady, pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
			n.Status.Conditions = nil
		})), []string{ReasonNodeNotReady}},

		{"cordoned node rejected", func(pi *podInfo, ni *nodeInfo) []string { return filterNodeUnschedulable(logger, pi, ni) },
			pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Spec.Unschedulable = true })), []string{ReasonUnschedulable}},
		{"cordoned node accepted with toleration", func(pi *podInfo, ni *nodeInfo) []string { return filterNodeUnschedulable(logger, pi, ni) },
			pod("p", "", "", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: taintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}), infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Spec.Unschedulable = true })), nil},

		{"nodeName other node rejected", filterNodeName, pod("p", "", "", boundTo("other")), infoFor(node("n", "1", "1Gi")), []string{ReasonNodeName}},
		{"nodeName same node fits", filterNodeName, pod("p", "", "", boundTo("n")), infoFor(node("n", "1", "1Gi")), nil},

		{"untolerated NoSchedule taint", func(pi *podInfo, ni *nodeInfo) []string { return filterTaints(logger, pi, ni) },
			pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
			})), []string{"node(s) had untolerated taint {dedicated: gpu}"}},
		{"untolerated NoExecute taint", func(pi *podInfo, ni *nodeInfo) []string { return filterTaints(logger, pi, ni) },
			pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: v1.TaintEffectNoExecute}}
			})), []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"PreferNoSchedule taint ignored", func(pi *podInfo, ni *nodeInfo) []string { return filterTaints(logger, pi, ni) },
			pod("p", "", ""), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
			})), nil},
		{"tolerated taint", func(pi *podInfo, ni *nodeInfo) []string { return filterTaints(logger, pi, ni) },
			pod("p", "", "", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
			}), infoFor(node("n", "1", "1Gi", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
			})), nil},

		{"nodeSelector mismatch", filterNodeAffinity, pod("p", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			infoFor(node("n", "1", "1Gi")), []string{ReasonNodeAffinity}},
		{"nodeSelector match", filterNodeAffinity, pod("p", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Labels["disk"] = "ssd" })), nil},
		{"required node affinity In mismatch", filterNodeAffinity, pod("p", "", "", requireZone("a", "b")),
			infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Labels["zone"] = "c" })), []string{ReasonNodeAffinity}},
		{"required node affinity In match", filterNodeAffinity, pod("p", "", "", requireZone("a", "b")),
			infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Labels["zone"] = "b" })), nil},

		{"host port conflict", filterNodePorts, pod("p", "", "", hostPortOn("", 8080)),
			infoFor(node("n", "1", "1Gi"), pod("q", "", "", hostPortOn("10.0.0.1", 8080), boundTo("n"))), []string{ReasonNodePorts}},
		{"host port on other IP fits", filterNodePorts, pod("p", "", "", hostPortOn("10.0.0.2", 8080)),
			infoFor(node("n", "1", "1Gi"), pod("q", "", "", hostPortOn("10.0.0.1", 8080), boundTo("n"))), nil},
		{"other host port fits", filterNodePorts, pod("p", "", "", hostPortOn("", 8081)),
			infoFor(node("n", "1", "1Gi"), pod("q", "", "", hostPortOn("", 8080), boundTo("n"))), nil},

		{"requests fit", filterResources, pod("p", "500m", "512Mi"),
			infoFor(node("n", "1", "1Gi"), pod("q", "500m", "512Mi", boundTo("n"))), nil},
		{"cpu insufficient after bound pods", filterResources, pod("p", "600m", "100Mi"),
			infoFor(node("n", "1", "1Gi"), pod("q", "500m", "512Mi", boundTo("n"))), []string{"Insufficient cpu"}},
		{"cpu and memory insufficient", filterResources, pod("p", "2", "2Gi"),
			infoFor(node("n", "1", "1Gi")), []string{"Insufficient cpu", "Insufficient memory"}},
		{"too many pods", filterResources, pod("p", "", ""),
			infoFor(node("n", "1", "1Gi", func(n *v1.Node) { n.Status.Allocatable[v1.ResourcePods] = resourceQty("1") }),
				pod("q", "", "", boundTo("n"))), []string{ReasonTooManyPods}},
		{"extended resource missing", filterResources, pod("p", "", "", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resourceQty("1")
		}), infoFor(node("n", "1", "1Gi")), []string{"Insufficient example.com/gpu"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.fn(newPodInfo(tc.pod), tc.node)
			if !slices.Equal(got, tc.reject) {
				t.Fatalf("reasons = %q, want %q", got, tc.reject)
			}
		})
	}
}

// TestRunFiltersStopsAtFirstFailingPlugin checks the framework rule: a tainted node that is also too
// small reports only the taint, the plugin that runs first.
func TestRunFiltersStopsAtFirstFailingPlugin(t *testing.T) {
	n := node("n", "1", "1Gi", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}} })
	got := runFilters(filters(logr.Discard()), newPodInfo(pod("p", "4", "")), infoFor(n))
	want := []string{"node(s) had untolerated taint {k: v}"}
	if !slices.Equal(got, want) {
		t.Fatalf("reasons = %q, want %q", got, want)
	}
	if got := runFilters(filters(logr.Discard()), newPodInfo(pod("p", "500m", "")), infoFor(node("m", "1", "1Gi"))); got != nil {
		t.Fatalf("fitting node rejected: %q", got)
	}
}

func requireZone(zones ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: zones}},
			}}},
		}}
	}
}

func hostPortOn(ip string, port int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: v1.ProtocolTCP}}
	}
}
