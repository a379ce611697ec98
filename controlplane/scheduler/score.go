package scheduler

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
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
)

// selectHost scores the feasible nodes (least allocated, topology spread, inter-pod affinity), sums
// the weighted scores per node and returns the index of the best one, choosing uniformly at random
// among nodes that tie for the top total (reservoir sampling, as upstream does). The error is a
// topology spread constraint whose selector does not parse.
func selectHost(cc *cycleContext, feasible []*nodeInfo, rnd *rand.Rand) (int, error) {
	spread, err := scoreTopologySpread(cc, feasible)
	if err != nil {
		return -1, err
	}
	affinity := scoreInterPodAffinity(cc, feasible)
	best, bestScore, ties := -1, int64(-1), 0
	for i, ni := range feasible {
		total := weightLeastAllocated*scoreLeastAllocated(cc.pod, ni) + weightTopologySpread*spread[i] + weightInterPodAffinity*affinity[i]
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
}

func (e *fitError) Error() string {
	if e.PreFilterMsg != "" {
		return "0/" + strconv.Itoa(e.NumAllNodes) + " nodes are available: " + e.PreFilterMsg + "."
	}
	counts := map[string]int{}
	for _, reasons := range e.NodeReasons {
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
	b.WriteString("0/" + strconv.Itoa(e.NumAllNodes) + " nodes are available")
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
