package scheduler

import (
	"fmt"
	"math"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Topology spread filter reasons (upstream PodTopologySpread plugin).
const (
	ReasonTopologySpread             = "node(s) didn't match pod topology spread constraints"
	ReasonTopologySpreadMissingLabel = ReasonTopologySpread + " (missing required label)"
)

// systemDefaultSpreadConstraints are the constraints a pod without topologySpreadConstraints gets,
// with the selector of the Services, ReplicationControllers, ReplicaSets and StatefulSets that select
// it (upstream PodTopologySpread's "System" defaulting, which replaced SelectorSpread): prefer at most
// 3 pods more on one node than on another, 5 more in one zone than in another.
var systemDefaultSpreadConstraints = []v1.TopologySpreadConstraint{
	{TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 5},
}

// spreadConstraint is a parsed v1.TopologySpreadConstraint with upstream's defaults applied:
// minDomains 1, nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore; matchLabelKeys are merged into
// the selector from the pod's labels.
type spreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	Selector           labels.Selector
	MinDomains         int32
	NodeAffinityPolicy v1.NodeInclusionPolicy
	NodeTaintsPolicy   v1.NodeInclusionPolicy
}

// parseSpreadConstraints returns the pod's constraints whose whenUnsatisfiable is action.
func parseSpreadConstraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	for i, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := selectorWithLabelKeys(c.LabelSelector, pod.Labels, c.MatchLabelKeys, nil)
		if err != nil {
			return nil, fmt.Errorf("spec.topologySpreadConstraints[%d].labelSelector: %w", i, err)
		}
		sc := spreadConstraint{
			MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, Selector: sel, MinDomains: 1,
			NodeAffinityPolicy: v1.NodeInclusionPolicyHonor, NodeTaintsPolicy: v1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			sc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			sc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			sc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		out = append(out, sc)
	}
	return out, nil
}

// defaultSpreadConstraints returns the system default constraints for action with the pod's default
// selector, or nil when nothing selects the pod or no default constraint has that action.
func defaultSpreadConstraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction, lk lookups) []spreadConstraint {
	var out []spreadConstraint
	for _, c := range systemDefaultSpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		out = append(out, spreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, MinDomains: 1,
			NodeAffinityPolicy: v1.NodeInclusionPolicyHonor, NodeTaintsPolicy: v1.NodeInclusionPolicyIgnore})
	}
	if len(out) == 0 {
		return nil
	}
	sel := lk.defaultSpreadSelector(pod)
	if sel.Empty() {
		return nil
	}
	for i := range out {
		out[i].Selector = sel
	}
	return out
}

// podSpreadConstraints returns the cycle pod's constraints with whenUnsatisfiable action: its own
// when it has any topologySpreadConstraints, otherwise the system defaults.
func podSpreadConstraints(cc *cycleContext, action v1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	if len(cc.pod.Pod.Spec.TopologySpreadConstraints) > 0 {
		return parseSpreadConstraints(cc.pod.Pod, action)
	}
	return defaultSpreadConstraints(cc.pod.Pod, action, cc.lookups), nil
}

// spreadNodeEligible reports whether a node's pods count for constraint c: the node passes the pod's
// required node affinity (when nodeAffinityPolicy is Honor) and its NoSchedule/NoExecute taints are
// tolerated (when nodeTaintsPolicy is Honor).
func spreadNodeEligible(logger logr.Logger, c *spreadConstraint, pod *v1.Pod, node *v1.Node, req nodeaffinity.RequiredNodeAffinity) bool {
	if c.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor {
		if match, _ := req.Match(node); !match {
			return false
		}
	}
	if c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations,
			doNotScheduleTaint, false)
		if untolerated {
			return false
		}
	}
	return true
}

// hasAllTopologyKeys reports whether a node carries the topology label of every constraint.
func hasAllTopologyKeys(node *v1.Node, cs []spreadConstraint) bool {
	for i := range cs {
		if _, ok := node.Labels[cs[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// countMatching counts the pods of ni in namespace ns, not being deleted, that selector matches.
func countMatching(ni *nodeInfo, sel labels.Selector, ns string) int64 {
	if sel.Empty() {
		return 0
	}
	var n int64
	for _, p := range ni.Pods {
		if p.Pod.Namespace == ns && p.Pod.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Pod.Labels)) {
			n++
		}
	}
	return n
}

// spreadFilter is the PodTopologySpread filter's state for one cycle: the pod's DoNotSchedule
// constraints and, per constraint, the matching pods in each eligible topology domain.
type spreadFilter struct {
	constraints []spreadConstraint
	domainCount []map[string]int64 // per constraint: topology value → matching pods
	minMatch    []int64            // per constraint: the global minimum used for the skew
	selfMatch   []int64            // per constraint: 1 when the pod matches its own selector
}

// newSpreadFilter computes the state over every node of the cycle (nodes that lack any constraint's
// topology label or that a constraint's node inclusion policies exclude are not domains). It returns
// nil when the pod has no DoNotSchedule constraint.
func newSpreadFilter(cc *cycleContext) (*spreadFilter, error) {
	pod := cc.pod.Pod
	cs, err := podSpreadConstraints(cc, v1.DoNotSchedule)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	f := &spreadFilter{constraints: cs, domainCount: make([]map[string]int64, len(cs)),
		minMatch: make([]int64, len(cs)), selfMatch: make([]int64, len(cs))}
	for i := range cs {
		f.domainCount[i] = map[string]int64{}
		if cs[i].Selector.Matches(labels.Set(pod.Labels)) {
			f.selfMatch[i] = 1
		}
	}
	req := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, ni := range cc.nodes {
		if !hasAllTopologyKeys(ni.Node, cs) {
			continue
		}
		for i := range cs {
			if !spreadNodeEligible(cc.logger, &cs[i], pod, ni.Node, req) {
				continue
			}
			f.domainCount[i][ni.Node.Labels[cs[i].TopologyKey]] += countMatching(ni, cs[i].Selector, pod.Namespace)
		}
	}
	for i := range cs {
		// Fewer eligible domains than minDomains: the global minimum is taken as 0.
		if len(f.domainCount[i]) < int(cs[i].MinDomains) {
			continue
		}
		f.minMatch[i] = math.MaxInt64
		for _, n := range f.domainCount[i] {
			f.minMatch[i] = min(f.minMatch[i], n)
		}
	}
	return f, nil
}

// filter rejects a node lacking a constraint's topology label, or where placing the pod would make
// (matching pods in the node's domain + 1 if the pod matches itself − global minimum) exceed maxSkew.
func (f *spreadFilter) filter(_ *podInfo, ni *nodeInfo) []string {
	for i := range f.constraints {
		c := &f.constraints[i]
		v, ok := ni.Node.Labels[c.TopologyKey]
		if !ok {
			return []string{ReasonTopologySpreadMissingLabel}
		}
		if f.domainCount[i][v]+f.selfMatch[i]-f.minMatch[i] > int64(c.MaxSkew) {
			return []string{ReasonTopologySpread}
		}
	}
	return nil
}

// scoreTopologySpread scores the feasible nodes by the pod's ScheduleAnyway constraints, or, when it
// has no constraints at all, by the system default ones (upstream PodTopologySpread scoring): a node's
// raw score is, per constraint, matching pods in its domain × log(domains + 2) + maxSkew − 1; fewer is
// better, so the scores become maxNodeScore × (max + min − score) / max. With explicit constraints a
// feasible node lacking one of their topology labels scores 0; with the defaults a node without a
// zone label is still spread by hostname. Every node scores maxNodeScore when no constraint applies.
func scoreTopologySpread(cc *cycleContext, feasible []*nodeInfo) ([]int64, error) {
	scores := make([]int64, len(feasible))
	pod := cc.pod.Pod
	requireAll := len(pod.Spec.TopologySpreadConstraints) > 0
	cs, err := podSpreadConstraints(cc, v1.ScheduleAnyway)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		for i := range scores {
			scores[i] = maxNodeScore
		}
		return scores, nil
	}
	ignored := make([]bool, len(feasible))
	counts := make([]map[string]int64, len(cs)) // per non-hostname constraint: value → pods
	for i := range cs {
		counts[i] = map[string]int64{}
	}
	eligibleNodes := 0
	for n, ni := range feasible {
		if requireAll && !hasAllTopologyKeys(ni.Node, cs) {
			ignored[n] = true
			continue
		}
		eligibleNodes++
		for i := range cs {
			if cs[i].TopologyKey != v1.LabelHostname {
				counts[i][ni.Node.Labels[cs[i].TopologyKey]] = 0
			}
		}
	}
	weights := make([]float64, len(cs))
	for i := range cs {
		size := len(counts[i])
		if cs[i].TopologyKey == v1.LabelHostname {
			size = eligibleNodes
		}
		weights[i] = math.Log(float64(size + 2))
	}
	req := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, ni := range cc.nodes {
		if requireAll && !hasAllTopologyKeys(ni.Node, cs) {
			continue
		}
		for i := range cs {
			if cs[i].TopologyKey == v1.LabelHostname || !spreadNodeEligible(cc.logger, &cs[i], pod, ni.Node, req) {
				continue
			}
			v := ni.Node.Labels[cs[i].TopologyKey]
			if _, ok := counts[i][v]; ok {
				counts[i][v] += countMatching(ni, cs[i].Selector, pod.Namespace)
			}
		}
	}
	minScore, maxScore := int64(math.MaxInt64), int64(0)
	for n, ni := range feasible {
		if ignored[n] {
			continue
		}
		var raw float64
		for i := range cs {
			v, ok := ni.Node.Labels[cs[i].TopologyKey]
			if !ok {
				continue
			}
			cnt := counts[i][v]
			if cs[i].TopologyKey == v1.LabelHostname {
				cnt = countMatching(ni, cs[i].Selector, pod.Namespace)
			}
			raw += float64(cnt)*weights[i] + float64(cs[i].MaxSkew-1)
		}
		scores[n] = int64(math.Round(raw))
		minScore, maxScore = min(minScore, scores[n]), max(maxScore, scores[n])
	}
	for n := range scores {
		switch {
		case ignored[n]:
			scores[n] = 0
		case maxScore == 0:
			scores[n] = maxNodeScore
		default:
			scores[n] = maxNodeScore * (maxScore + minScore - scores[n]) / maxScore
		}
	}
	return scores, nil
}
