package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Preemption messages, worded as upstream's DefaultPreemption plugin.
const (
	msgNotEligibleNever       = "not eligible due to preemptionPolicy=Never."
	msgNotEligibleTerminating = "not eligible due to a terminating pod on the nominated node."
	reasonNoVictims           = "No preemption victims found for incoming pod"
	reasonNotHelpful          = "Preemption is not helpful for scheduling"
)

// candidate is a node where deleting victims lets the preemptor fit.
type candidate struct {
	node    string
	victims []*v1.Pod // most important first
	// pdbViolations counts the victims whose eviction a PodDisruptionBudget does not allow.
	pdbViolations int
}

// resolvableByPreemption reports whether a node that failed with reasons could fit once pods leave it:
// resources, the pod count, host ports, pod anti-affinity (the pod's or an existing pod's) and topology
// spread skew (upstream's Unschedulable, against UnschedulableAndUnresolvable for the other plugins).
func resolvableByPreemption(reasons []string) bool {
	if len(reasons) == 0 {
		return false
	}
	switch r := reasons[0]; r {
	case ReasonTooManyPods, ReasonNodePorts, ReasonPodAntiAffinity, ReasonExistingPodsAntiAffinity, ReasonTopologySpread:
		return true
	default:
		return strings.HasPrefix(r, "Insufficient ")
	}
}

// eligibleToPreempt says whether pod may preempt at all (upstream's PodEligibleToPreemptOthers): not
// with preemptionPolicy Never, and not while a pod of lower priority on its nominated node is still
// terminating (it waits for the room its last preemption made). The message says why not.
func eligibleToPreempt(pod *v1.Pod, nodes map[string]*nodeInfo) (bool, string) {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return false, msgNotEligibleNever
	}
	if nnn := pod.Status.NominatedNodeName; nnn != "" {
		if ni, ok := nodes[nnn]; ok {
			prio := corev1helpers.PodPriority(pod)
			for _, pi := range ni.Pods {
				if pi.Pod.DeletionTimestamp != nil && corev1helpers.PodPriority(pi.Pod) < prio {
					return false, msgNotEligibleTerminating
				}
			}
		}
	}
	return true, ""
}

// preemptionSim evaluates, for one pod, which pods of lower priority would have to leave a node for
// it to fit. It holds the cycle's state; fits re-runs the filters (and the cluster-wide spread and
// affinity state) with one node replaced by a modified copy.
type preemptionSim struct {
	cc        *cycleContext
	filters   []filter
	nominated map[string][]*podInfo
	pdbs      []*policyv1.PodDisruptionBudget
}

func (ps *preemptionSim) fits(changed *nodeInfo) bool {
	cc := *ps.cc
	cc.nodes = make([]*nodeInfo, len(ps.cc.nodes))
	for i, ni := range ps.cc.nodes {
		cc.nodes[i] = ni
		if ni.Node.Name == changed.Node.Name {
			cc.nodes[i] = changed
		}
	}
	fs, err := cycleFilters(ps.filters, &cc)
	if err != nil {
		return false
	}
	return runFilters(fs, cc.pod, withNominated(changed, ps.nominated[changed.Node.Name], corev1helpers.PodPriority(cc.pod.Pod))) == nil
}

// selectVictims follows upstream's SelectVictimsOnNode: remove every pod of lower priority; if the pod
// still does not fit, the node is no candidate. Otherwise add the removed pods back, most important
// first, the ones whose eviction a PodDisruptionBudget forbids before the others, keeping each that
// still lets the pod fit; the rest are the victims.
func (ps *preemptionSim) selectVictims(ni *nodeInfo) *candidate {
	prio := corev1helpers.PodPriority(ps.cc.pod.Pod)
	var potential []string
	for key, pi := range ni.Pods {
		if corev1helpers.PodPriority(pi.Pod) < prio {
			potential = append(potential, key)
		}
	}
	if len(potential) == 0 {
		return nil
	}
	sim := ni.clone()
	lower := make([]*podInfo, 0, len(potential))
	for _, key := range potential {
		lower = append(lower, ni.Pods[key])
		sim.removePod(key)
	}
	if !ps.fits(sim) {
		return nil
	}
	slices.SortStableFunc(lower, func(a, b *podInfo) int {
		if moreImportant(a.Pod, b.Pod) {
			return -1
		}
		if moreImportant(b.Pod, a.Pod) {
			return 1
		}
		return 0
	})
	violating, nonViolating := splitByPDB(lower, ps.pdbs)
	c := &candidate{node: ni.Node.Name}
	reprieve := func(pi *podInfo) bool {
		key := podKey(pi.Pod)
		sim.addPod(key, pi)
		if ps.fits(sim) {
			return true
		}
		sim.removePod(key)
		c.victims = append(c.victims, pi.Pod)
		return false
	}
	for _, pi := range violating {
		if !reprieve(pi) {
			c.pdbViolations++
		}
	}
	for _, pi := range nonViolating {
		reprieve(pi)
	}
	slices.SortStableFunc(c.victims, func(a, b *v1.Pod) int {
		if moreImportant(a, b) {
			return -1
		}
		if moreImportant(b, a) {
			return 1
		}
		return 0
	})
	return c
}

// moreImportant orders pods as upstream's MoreImportantPod: higher priority, then started earlier.
func moreImportant(a, b *v1.Pod) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return podStartTime(a).Before(podStartTime(b))
}

// podStartTime is status.startTime, or now for a pod that has not started (upstream's GetPodStartTime).
func podStartTime(p *v1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return time.Now()
}

// splitByPDB splits pods (in order) into those whose eviction a PodDisruptionBudget of their namespace
// that selects them does not allow (no disruptions left once the earlier pods are counted) and the
// others, as upstream's filterPodsWithPDBViolation. Pods the budget already lists as disrupted are not
// counted again.
func splitByPDB(pods []*podInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, nonViolating []*podInfo) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil {
			selectors[i] = sel
		}
	}
	for _, pi := range pods {
		violates := false
		for i, pdb := range pdbs {
			if pdb.Namespace != pi.Pod.Namespace || selectors[i] == nil || selectors[i].Empty() ||
				!selectors[i].Matches(labels.Set(pi.Pod.Labels)) {
				continue
			}
			if _, disrupted := pdb.Status.DisruptedPods[pi.Pod.Name]; disrupted {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				violates = true
			}
		}
		if violates {
			violating = append(violating, pi)
		} else {
			nonViolating = append(nonViolating, pi)
		}
	}
	return violating, nonViolating
}

// pickCandidate chooses among candidates as upstream's pickOneNodeForPreemption, each criterion
// breaking the previous one's ties: fewest PodDisruptionBudget violations, lowest priority of the most
// important victim, lowest sum of victim priorities, fewest victims, the latest start among the most
// important victims; then the first.
func pickCandidate(cands []*candidate) *candidate {
	if len(cands) == 0 {
		return nil
	}
	for _, c := range cands {
		if len(c.victims) == 0 {
			return c
		}
	}
	scores := []func(c *candidate) int64{
		func(c *candidate) int64 { return -int64(c.pdbViolations) },
		func(c *candidate) int64 { return -int64(corev1helpers.PodPriority(c.victims[0])) },
		func(c *candidate) int64 {
			var sum int64
			for _, v := range c.victims {
				// shifted so that every term is positive, as upstream
				sum += int64(corev1helpers.PodPriority(v)) + int64(math.MaxInt32) + 1
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 {
			top := corev1helpers.PodPriority(c.victims[0])
			earliest := podStartTime(c.victims[0])
			for _, v := range c.victims {
				if corev1helpers.PodPriority(v) == top && podStartTime(v).Before(earliest) {
					earliest = podStartTime(v)
				}
			}
			return earliest.UnixNano()
		},
	}
	left := cands
	for _, score := range scores {
		best := int64(math.MinInt64)
		var next []*candidate
		for _, c := range left {
			switch v := score(c); {
			case v > best:
				best, next = v, []*candidate{c}
			case v == best:
				next = append(next, c)
			}
		}
		if left = next; len(left) == 1 {
			break
		}
	}
	return left[0]
}

// findCandidate runs preemption's dry run for pod over the cache, after fitErr said no node fits. It
// returns the chosen candidate, or nil with the PostFilter message saying why there is none.
func (s *Scheduler) findCandidate(pod *v1.Pod, fitErr *fitError, pdbs []*policyv1.PodDisruptionBudget) (*candidate, string) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if ok, msg := eligibleToPreempt(pod, s.cache.nodes); !ok {
		return nil, msg
	}
	cc := s.cycleLocked(pod)
	ps := &preemptionSim{cc: cc, filters: s.filters, nominated: s.cache.nominatedByNodeLocked(podKey(pod)), pdbs: pdbs}
	reasons := map[string][]string{}
	var cands []*candidate
	for _, ni := range cc.nodes {
		if !resolvableByPreemption(fitErr.NodeReasons[ni.Node.Name]) {
			reasons[ni.Node.Name] = []string{reasonNotHelpful}
			continue
		}
		if c := ps.selectVictims(ni); c != nil {
			cands = append(cands, c)
			continue
		}
		reasons[ni.Node.Name] = []string{reasonNoVictims}
	}
	if c := pickCandidate(cands); c != nil {
		return c, ""
	}
	return nil, "preemption: " + nodesAvailable(len(cc.nodes), reasons)
}

// preempt is the PostFilter step for a pod no node fits (upstream's DefaultPreemption): it picks a
// node and victims (findCandidate), marks each victim with the DisruptionTarget condition, deletes it
// gracefully and records a Preempted event on it, clears the nomination of lower-priority pods
// nominated to that node, and returns the node to nominate for pod. Without a candidate it returns ""
// and the message to append to the pod's FailedScheduling message.
func (s *Scheduler) preempt(ctx context.Context, pod *v1.Pod, fitErr *fitError) (string, string, error) {
	if fitErr.PreFilterMsg != "" {
		return "", "", nil
	}
	pdbs, err := s.pdbLister.List(labels.Everything())
	if err != nil {
		return "", "", fmt.Errorf("list poddisruptionbudgets: %w", err)
	}
	c, msg := s.findCandidate(pod, fitErr, pdbs)
	if c == nil {
		return "", msg, nil
	}
	for _, victim := range c.victims {
		if victim.DeletionTimestamp != nil {
			continue
		}
		if err := s.markDisruptionTarget(ctx, victim, pod); err != nil {
			return "", "", err
		}
		if err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("preempt %s: %w", podKey(victim), err)
		}
		s.log.Info("pod preempted", "pod", podKey(victim), "preemptor", podKey(pod), "node", c.node)
		s.recorder.Eventf(victim, v1.EventTypeNormal, "Preempted", "Preempted by pod %v on node %v", pod.UID, c.node)
	}
	s.clearLowerNominations(ctx, pod, c.node)
	return c.node, "", nil
}

// markDisruptionTarget adds DisruptionTarget=True, reason PreemptionByScheduler, to victim's status.
func (s *Scheduler) markDisruptionTarget(ctx context.Context, victim, preemptor *v1.Pod) error {
	name := preemptor.Spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
		Message: name + ": preempting to accommodate a higher priority pod", LastTransitionTime: metav1.Now()}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(victim.Namespace).Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set DisruptionTarget on %s: %w", podKey(victim), err)
	}
	return nil
}

// clearLowerNominations drops the nomination of pods of lower priority than pod nominated to node:
// the room preemption makes there is for pod (upstream's clearNominatedNodeName). Failures only delay
// those pods, so they are logged.
func (s *Scheduler) clearLowerNominations(ctx context.Context, pod *v1.Pod, node string) {
	prio := corev1helpers.PodPriority(pod)
	s.cache.mu.Lock()
	var lower []*v1.Pod
	for _, pi := range s.cache.nominatedByNodeLocked(podKey(pod))[node] {
		if corev1helpers.PodPriority(pi.Pod) < prio {
			lower = append(lower, pi.Pod)
		}
	}
	s.cache.mu.Unlock()
	for _, p := range lower {
		patch := []byte(`{"status":{"nominatedNodeName":null}}`)
		if _, err := s.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("clearing nominated node failed", "pod", podKey(p), "err", err)
		}
	}
}
