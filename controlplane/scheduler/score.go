package scheduler

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// maxNodeScore is the top score one score plugin gives a node (upstream framework.MaxNodeScore).
const maxNodeScore int64 = 100

// scoreLeastAllocated favours nodes with more room left after placing the pod: for CPU and memory,
// (allocatable − requested) × 100 / allocatable, averaged; requests include the pod and count
// containers without requests at the default 100m CPU / 200Mi (upstream NodeResourcesFit,
// LeastAllocated strategy).
func scoreLeastAllocated(pi *podInfo, ni *nodeInfo) int64 {
	a := resourcesFromList(ni.Node.Status.Allocatable)
	cpu := leastAllocated(ni.NonZero.MilliCPU+pi.NonZero.MilliCPU, a.MilliCPU)
	mem := leastAllocated(ni.NonZero.Memory+pi.NonZero.Memory, a.Memory)
	return (cpu + mem) / 2
}

func leastAllocated(requested, capacity int64) int64 {
	if capacity <= 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

// Score plugin weights of upstream's default profile: a node's total is the weighted sum of each
// plugin's 0–maxNodeScore score.
const (
	weightLeastAllocated   = 1
	weightTopologySpread   = 2
	weightInterPodAffinity = 2
	weightNodeAffinity     = 2
	weightTaintToleration  = 3
)

// scoreNodeAffinity scores the feasible nodes by the pod's preferred node affinity: the sum of the
// weights of the preferredDuringSchedulingIgnoredDuringExecution terms a node matches, scaled to
// 0–maxNodeScore by the highest sum (all 0 when no node matches any; upstream NodeAffinity score).
func scoreNodeAffinity(pi *podInfo, feasible []*nodeInfo) ([]int64, error) {
	scores := make([]int64, len(feasible))
	a := pi.Pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return scores, nil
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return nil, fmt.Errorf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
	}
	for i, ni := range feasible {
		scores[i] = terms.Score(ni.Node)
	}
	normalize(scores, false)
	return scores, nil
}

// scoreTaintToleration favours nodes with fewer PreferNoSchedule taints the pod does not tolerate
// (tolerations with effect PreferNoSchedule or none count): maxNodeScore − count × maxNodeScore / the
// highest count (upstream TaintToleration score).
func scoreTaintToleration(logger logr.Logger, pi *podInfo, feasible []*nodeInfo) []int64 {
	var tols []v1.Toleration
	for _, t := range pi.Pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			tols = append(tols, t)
		}
	}
	scores := make([]int64, len(feasible))
	for i, ni := range feasible {
		for j := range ni.Node.Spec.Taints {
			t := &ni.Node.Spec.Taints[j]
			if t.Effect == v1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(logger, tols, t, false) {
				scores[i]++
			}
		}
	}
	normalize(scores, true)
	return scores
}

// normalize scales scores to 0–maxNodeScore by the highest one, reversed (maxNodeScore − scaled)
// when reverse; with every score 0 they stay 0, or become maxNodeScore when reverse (upstream
// DefaultNormalizeScore).
func normalize(scores []int64, reverse bool) {
	var top int64
	for _, s := range scores {
		top = max(top, s)
	}
	for i := range scores {
		switch {
		case top == 0 && reverse:
			scores[i] = maxNodeScore
		case top == 0:
		case reverse:
			scores[i] = maxNodeScore - maxNodeScore*scores[i]/top
		default:
			scores[i] = maxNodeScore * scores[i] / top
		}
	}
}

// selectHost scores the feasible nodes (least allocated, topology spread, inter-pod affinity,
// preferred node affinity, PreferNoSchedule taints), sums the weighted scores per node and returns the
// index of the best one, choosing uniformly at random among nodes that tie for the top total
// (reservoir sampling, as upstream does). The error is a ScheduleAnyway spread constraint or a
// preferred node affinity term that does not parse.
func selectHost(cc *cycleContext, feasible []*nodeInfo, rnd *rand.Rand) (int, error) {
	spread, err := scoreTopologySpread(cc, feasible)
	if err != nil {
		return -1, err
	}
	nodeAff, err := scoreNodeAffinity(cc.pod, feasible)
	if err != nil {
		return -1, err
	}
	podAff := scoreInterPodAffinity(cc, feasible)
	taints := scoreTaintToleration(cc.logger, cc.pod, feasible)
	best, bestScore, ties := -1, int64(-1), 0
	for i, ni := range feasible {
		total := weightLeastAllocated*scoreLeastAllocated(cc.pod, ni) + weightTopologySpread*spread[i] +
			weightInterPodAffinity*podAff[i] + weightNodeAffinity*nodeAff[i] + weightTaintToleration*taints[i]
		switch {
		case total > bestScore:
			best, bestScore, ties = i, total, 1
		case total == bestScore:
			ties++
			if rnd.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best, nil
}

// fitError explains why no node fits a pod: the reasons each node failed, summed into the
// PodScheduled=False message "0/N nodes are available: <count> <reason>, …." in kube-scheduler's
// wording. Reasons are listed with the most frequent first (ties in text order), as nodekit's issue
// specifies ("2 Insufficient cpu, 1 node(s) had untolerated taint …"); kube-scheduler itself sorts the
// "<count> <reason>" strings lexically.
//
// PreFilterMsg, when set, is why the pod was refused before any node was tried (its affinity or
// spread constraints do not parse); the message is then "0/N nodes are available: <PreFilterMsg>.".
type fitError struct {
	NumAllNodes  int
	NodeReasons  map[string][]string // node name → reasons
	PreFilterMsg string
	// PostFilterMsg is why preemption did not help, appended to the message (upstream's PostFilterMsg).
	PostFilterMsg string
}

func (e *fitError) Error() string {
	msg := nodesAvailable(e.NumAllNodes, e.NodeReasons)
	if e.PreFilterMsg != "" {
		msg = "0/" + strconv.Itoa(e.NumAllNodes) + " nodes are available: " + e.PreFilterMsg + "."
	}
	if e.PostFilterMsg != "" {
		msg += " " + e.PostFilterMsg
	}
	return msg
}

// nodesAvailable words per-node failure reasons as upstream's FitError: "0/N nodes are available:
// <count> <reason>, …." with the most frequent reason first.
func nodesAvailable(numNodes int, nodeReasons map[string][]string) string {
	counts := map[string]int{}
	for _, reasons := range nodeReasons {
		for _, r := range reasons {
			counts[r]++
		}
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	var b strings.Builder
	b.WriteString("0/" + strconv.Itoa(numNodes) + " nodes are available")
	if len(reasons) == 0 {
		b.WriteString(".")
		return b.String()
	}
	b.WriteString(": ")
	for i, r := range reasons {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(counts[r]) + " " + r)
	}
	b.WriteString(".")
	return b.String()
}
