package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// clusterCase is a table case for the filters computed over the whole cluster: the pod, the nodes
// with their pods, and the reasons expected per node (a node missing from want fits).
type clusterCase struct {
	name  string
	pod   *v1.Pod
	lk    *fakeLookups
	nodes []*nodeInfo
	want  map[string][]string
}

func runClusterCases(t *testing.T, cases []clusterCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := cycleFor(tc.pod, tc.lk, tc.nodes...)
			fs, err := cycleFilters(nil, cc)
			if err != nil {
				t.Fatal(err)
			}
			for _, ni := range tc.nodes {
				got := runFilters(fs, cc.pod, ni)
				if want := tc.want[ni.Node.Name]; !slices.Equal(got, want) {
					t.Errorf("node %s: reasons = %q, want %q", ni.Node.Name, got, want)
				}
			}
		})
	}
}

// zonedCluster is a1, a2 (zone a), b (zone b) and nz (no zone label), with pods placed by bound node.
func zonedCluster(pods ...*v1.Pod) []*nodeInfo {
	nodes := []*nodeInfo{
		infoFor(node("a1", "4", "4Gi", zone("a"))), infoFor(node("a2", "4", "4Gi", zone("a"))),
		infoFor(node("b", "4", "4Gi", zone("b"))), infoFor(node("nz", "4", "4Gi")),
	}
	for i, p := range pods {
		for _, ni := range nodes {
			if ni.Node.Name == p.Spec.NodeName {
				ni.addPod(fmt.Sprintf("%s/%s-%d", p.Namespace, p.Name, i), newPodInfo(p))
			}
		}
	}
	return nodes
}

func TestInterPodAffinityFilter(t *testing.T) {
	web := func(name, node string, mutate ...func(*v1.Pod)) *v1.Pod {
		return pod(name, "", "", append([]func(*v1.Pod){withLabels("app", "web"), boundTo(node)}, mutate...)...)
	}
	antiWebHost := requiredAnti(term(v1.LabelHostname, "app", "web"))
	nsTeam := &fakeLookups{namespaces: map[string]labels.Set{"default": {"team": "x"}, "other": {"team": "x"}, "third": {"team": "y"}}}
	nsSelector := func(p *v1.PodAffinityTerm) *v1.PodAffinityTerm {
		p.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
		return p
	}
	withKeys := func(t v1.PodAffinityTerm, match, mismatch []string) v1.PodAffinityTerm {
		t.MatchLabelKeys, t.MismatchLabelKeys = match, mismatch
		return t
	}
	tenantAnti := v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, MismatchLabelKeys: []string{"tenant"},
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}}}
	rejectAll := func(reason string, names ...string) map[string][]string {
		m := map[string][]string{}
		for _, n := range names {
			m[n] = []string{reason}
		}
		return m
	}
	runClusterCases(t, []clusterCase{
		{name: "no terms anywhere", pod: pod("p", "", "", withLabels("app", "web")), nodes: zonedCluster(web("w", "a1"))},
		{name: "anti-affinity by hostname", pod: pod("p", "", "", withLabels("app", "web"), antiWebHost),
			nodes: zonedCluster(web("w", "a1")), want: rejectAll(ReasonPodAntiAffinity, "a1")},
		{name: "anti-affinity by zone; node without zone fits", pod: pod("p", "", "", requiredAnti(term(v1.LabelTopologyZone, "app", "web"))),
			nodes: zonedCluster(web("w", "a1")), want: rejectAll(ReasonPodAntiAffinity, "a1", "a2")},
		{name: "anti-affinity ignores other namespaces", pod: pod("p", "", "", antiWebHost),
			nodes: zonedCluster(web("w", "a1", inNamespace("other")))},
		{name: "anti-affinity with explicit namespaces", pod: pod("p", "", "", requiredAnti(v1.PodAffinityTerm{
			TopologyKey: v1.LabelHostname, Namespaces: []string{"other"}, LabelSelector: term("", "app", "web").LabelSelector})),
			nodes: zonedCluster(web("w", "a1", inNamespace("other")), web("w2", "b")), want: rejectAll(ReasonPodAntiAffinity, "a1")},
		{name: "affinity by zone co-locates", pod: pod("p", "", "", requiredAffinity(term(v1.LabelTopologyZone, "app", "db"))),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), boundTo("b"))), want: rejectAll(ReasonPodAffinity, "a1", "a2", "nz")},
		{name: "affinity by hostname", pod: pod("p", "", "", requiredAffinity(term(v1.LabelHostname, "app", "db"))),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), boundTo("nz"))), want: rejectAll(ReasonPodAffinity, "a1", "a2", "b")},
		{name: "affinity without any matching pod", pod: pod("p", "", "", requiredAffinity(term(v1.LabelHostname, "app", "db"))),
			nodes: zonedCluster(web("w", "a1")), want: rejectAll(ReasonPodAffinity, "a1", "a2", "b", "nz")},
		{name: "self-affinity: first pod of the group goes where the key exists", pod: pod("p", "", "", withLabels("app", "db"), requiredAffinity(term(v1.LabelTopologyZone, "app", "db"))),
			nodes: zonedCluster(web("w", "a1")), want: rejectAll(ReasonPodAffinity, "nz")},
		{name: "self-affinity does not apply once a matching pod exists", pod: pod("p", "", "", withLabels("app", "db"), requiredAffinity(term(v1.LabelTopologyZone, "app", "db"))),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), boundTo("b"))), want: rejectAll(ReasonPodAffinity, "a1", "a2", "nz")},
		{name: "all affinity terms must match one pod", pod: pod("p", "", "", requiredAffinity(term(v1.LabelTopologyZone, "app", "db"), term(v1.LabelTopologyZone, "tier", "cache"))),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), boundTo("a1")), pod("cache", "", "", withLabels("tier", "cache"), boundTo("a1"))),
			want:  rejectAll(ReasonPodAffinity, "a1", "a2", "b", "nz")},
		{name: "one pod matching all affinity terms", pod: pod("p", "", "", requiredAffinity(term(v1.LabelTopologyZone, "app", "db"), term(v1.LabelHostname, "tier", "cache"))),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db", "tier", "cache"), boundTo("a1"))),
			want:  rejectAll(ReasonPodAffinity, "a2", "b", "nz")},
		{name: "affinity through namespaceSelector", pod: pod("p", "", "", requiredAffinity(*nsSelector(&v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: term("", "app", "db").LabelSelector}))),
			lk:    nsTeam,
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), inNamespace("other"), boundTo("b")), pod("db3", "", "", withLabels("app", "db"), inNamespace("third"), boundTo("a1"))),
			want:  rejectAll(ReasonPodAffinity, "a1", "a2", "nz")},
		{name: "empty namespaceSelector selects every namespace", pod: pod("p", "", "", requiredAffinity(v1.PodAffinityTerm{TopologyKey: v1.LabelHostname,
			NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: term("", "app", "db").LabelSelector})),
			nodes: zonedCluster(pod("db", "", "", withLabels("app", "db"), inNamespace("third"), boundTo("a2"))), want: rejectAll(ReasonPodAffinity, "a1", "b", "nz")},
		{name: "existing pod's anti-affinity rejects the incoming pod", pod: pod("p", "", "", withLabels("app", "web")),
			nodes: zonedCluster(pod("loner", "", "", boundTo("a1"), requiredAnti(term(v1.LabelTopologyZone, "app", "web")))),
			want:  rejectAll(ReasonExistingPodsAntiAffinity, "a1", "a2")},
		{name: "existing pod's anti-affinity in another namespace", pod: pod("p", "", "", withLabels("app", "web")),
			nodes: zonedCluster(pod("loner", "", "", inNamespace("other"), boundTo("a1"), requiredAnti(term(v1.LabelTopologyZone, "app", "web"))))},
		{name: "existing pod's anti-affinity through namespaceSelector", pod: pod("p", "", "", withLabels("app", "web")), lk: nsTeam,
			nodes: zonedCluster(pod("loner", "", "", inNamespace("other"), boundTo("b"), requiredAnti(*nsSelector(&v1.PodAffinityTerm{
				TopologyKey: v1.LabelHostname, LabelSelector: term("", "app", "web").LabelSelector})))),
			want: rejectAll(ReasonExistingPodsAntiAffinity, "b")},
		{name: "own anti-affinity is checked before the existing pods'", pod: pod("p", "", "", withLabels("app", "web"), antiWebHost),
			nodes: zonedCluster(web("w", "a1", antiWebHost)), want: rejectAll(ReasonPodAntiAffinity, "a1")},
		{name: "matchLabelKeys: only the same version repels", pod: pod("p", "", "", withLabels("app", "web", "version", "v2"),
			requiredAnti(withKeys(term(v1.LabelHostname, "app", "web"), []string{"version"}, nil))),
			nodes: zonedCluster(web("w1", "a1", withLabels("version", "v1")), web("w2", "a2", withLabels("version", "v2"))),
			want:  rejectAll(ReasonPodAntiAffinity, "a2")},
		{name: "mismatchLabelKeys: other tenants repel", pod: pod("p", "", "", withLabels("tenant", "t1"), requiredAnti(tenantAnti)),
			nodes: zonedCluster(pod("o", "", "", withLabels("tenant", "t2"), boundTo("a1")), pod("s", "", "", withLabels("tenant", "t1"), boundTo("a2"))),
			want:  rejectAll(ReasonPodAntiAffinity, "a1")},
	})
}

func TestTopologySpreadFilter(t *testing.T) {
	x := func(name, node string, mutate ...func(*v1.Pod)) *v1.Pod {
		return pod(name, "", "", append([]func(*v1.Pod){withLabels("app", "x"), boundTo(node)}, mutate...)...)
	}
	byZone := func(maxSkew int32, mutate func(*v1.TopologySpreadConstraint)) func(*v1.Pod) {
		return spread(maxSkew, v1.LabelTopologyZone, v1.DoNotSchedule, mutate, "app", "x")
	}
	honor, ignore := v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore
	missing := []string{ReasonTopologySpreadMissingLabel}
	skew := []string{ReasonTopologySpread}
	runClusterCases(t, []clusterCase{
		{name: "maxSkew 1: the fuller zone is refused", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, nil)),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"a1": skew, "a2": skew, "nz": missing}},
		{name: "balanced zones accept either", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, nil)),
			nodes: zonedCluster(x("x1", "a1"), x("x2", "b")), want: map[string][]string{"nz": missing}},
		{name: "maxSkew 2 tolerates one more", pod: pod("p", "", "", withLabels("app", "x"), byZone(2, nil)),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"nz": missing}},
		{name: "a pod not matching its own selector adds nothing", pod: pod("p", "", "", withLabels("app", "y"), byZone(1, nil)),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"nz": missing}},
		{name: "other namespaces and terminating pods do not count", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, nil)),
			nodes: zonedCluster(x("x1", "a1", inNamespace("other")), x("x2", "a2", func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{} })),
			want:  map[string][]string{"nz": missing}},
		{name: "minDomains above the domains: global minimum 0", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, func(c *v1.TopologySpreadConstraint) { c.MinDomains = ptr(int32(3)) })),
			nodes: zonedCluster(x("x1", "a1"), x("x2", "b")), want: map[string][]string{"a1": skew, "a2": skew, "b": skew, "nz": missing}},
		{name: "nodeAffinityPolicy Honor: nodes outside the pod's node affinity are no domain", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, nil),
			func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelTopologyZone: "a"} }),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"nz": missing}},
		{name: "nodeAffinityPolicy Ignore: they are", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, func(c *v1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore }),
			func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelTopologyZone: "a"} }),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"a1": skew, "a2": skew, "nz": missing}},
		{name: "nodeTaintsPolicy Honor: an untolerated tainted zone is no domain", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, func(c *v1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor })),
			nodes: taint(zonedCluster(x("x1", "a1")), "b"), want: map[string][]string{"nz": missing}},
		{name: "nodeTaintsPolicy Ignore (default): it is", pod: pod("p", "", "", withLabels("app", "x"), byZone(1, nil)),
			nodes: taint(zonedCluster(x("x1", "a1")), "b"), want: map[string][]string{"a1": skew, "a2": skew, "nz": missing}},
		{name: "matchLabelKeys: only the same revision counts", pod: pod("p", "", "", withLabels("app", "x", "rev", "2"),
			byZone(1, func(c *v1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"rev"} })),
			nodes: zonedCluster(x("x1", "a1", withLabels("rev", "1")), x("x2", "b", withLabels("rev", "2"))), want: map[string][]string{"b": skew, "nz": missing}},
		{name: "hostname spreading", pod: pod("p", "", "", withLabels("app", "x"), spread(1, v1.LabelHostname, v1.DoNotSchedule, nil, "app", "x")),
			nodes: zonedCluster(x("x1", "a1")), want: map[string][]string{"a1": skew}},
		{name: "ScheduleAnyway never filters", pod: pod("p", "", "", withLabels("app", "x"), spread(1, v1.LabelTopologyZone, v1.ScheduleAnyway, nil, "app", "x")),
			nodes: zonedCluster(x("x1", "a1"), x("x2", "a1"))},
		{name: "system defaults never filter", pod: pod("p", "", "", withLabels("app", "x"), ownedBy("rs")),
			lk:    &fakeLookups{spreadSelector: labels.SelectorFromSet(labels.Set{"app": "x"})},
			nodes: zonedCluster(x("x1", "a1"), x("x2", "a1"), x("x3", "a1"), x("x4", "a1"))},
	})
}

// taint puts an untolerated NoSchedule taint on the named node of nodes.
func taint(nodes []*nodeInfo, name string) []*nodeInfo {
	for _, ni := range nodes {
		if ni.Node.Name == name {
			ni.Node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
		}
	}
	return nodes
}

func ptr[T any](v T) *T { return &v }

// TestCycleFiltersRefuseUnparsableTerms: a selector that does not parse is reported with its field.
func TestCycleFiltersRefuseUnparsableTerms(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	p := pod("p", "", "", requiredAffinity(v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: bad}))
	_, err := cycleFilters(nil, cycleFor(p, nil))
	if err == nil || !strings.Contains(err.Error(), "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector") {
		t.Fatalf("err = %v", err)
	}
	q := pod("q", "", "", func(p *v1.Pod) {
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: bad}}
	})
	if _, err := cycleFilters(nil, cycleFor(q, nil)); err == nil || !strings.Contains(err.Error(), "spec.topologySpreadConstraints[0].labelSelector") {
		t.Fatalf("err = %v", err)
	}
}
