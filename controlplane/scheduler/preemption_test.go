package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func priority(p int32) func(*v1.Pod) { return func(pod *v1.Pod) { pod.Spec.Priority = &p } }

func startedAt(sec int) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.StartTime = &metav1.Time{Time: time.Unix(int64(1000+sec), 0)} }
}

func victimNames(c *candidate) []string {
	var out []string
	for _, v := range c.victims {
		out = append(out, v.Name)
	}
	return out
}

func simFor(p *v1.Pod, pdbs []*policyv1.PodDisruptionBudget, nodes ...*nodeInfo) *preemptionSim {
	return &preemptionSim{cc: cycleFor(p, nil, nodes...), filters: filters(logr.Discard()), pdbs: pdbs}
}

// The fewest victims that make room are chosen, most important reprieved first; pods of equal or
// higher priority are never victims.
func TestSelectVictimsMinimalSet(t *testing.T) {
	n := infoFor(node("n", "4", "8Gi"),
		pod("low-a", "1", "", boundTo("n"), priority(1), startedAt(1)),
		pod("low-b", "1", "", boundTo("n"), priority(1), startedAt(2)),
		pod("mid", "1", "", boundTo("n"), priority(5)),
		pod("same", "1", "", boundTo("n"), priority(10)))
	// 4 cpu, all taken. For 2 cpu: mid (priority 5) is reprieved, then low-a (started first) does not
	// fit back, nor low-b. For 1 cpu: mid and low-a are reprieved, low-b alone goes.
	for cpu, want := range map[string][]string{"2": {"low-a", "low-b"}, "1": {"low-b"}} {
		c := simFor(pod("p", cpu, "", priority(10)), nil, n).selectVictims(n)
		if c == nil || !slices.Equal(victimNames(c), want) || c.pdbViolations != 0 {
			t.Fatalf("cpu %s: candidate %+v, want victims %v", cpu, c, want)
		}
	}
}

// Removing every lower-priority pod is not enough: no candidate.
func TestSelectVictimsNoCandidate(t *testing.T) {
	n := infoFor(node("n", "2", "8Gi"),
		pod("low", "1", "", boundTo("n"), priority(1)),
		pod("high", "1", "", boundTo("n"), priority(100)))
	if c := simFor(pod("p", "2", "", priority(10)), nil, n).selectVictims(n); c != nil {
		t.Fatalf("candidate with victims %v", victimNames(c))
	}
}

// A pod a PodDisruptionBudget protects is reprieved before one it does not, even if less important.
func TestSelectVictimsPrefersPDBAllowed(t *testing.T) {
	n := infoFor(node("n", "2", "8Gi"),
		pod("guarded", "1", "", boundTo("n"), priority(1), withLabels("app", "db")),
		pod("free", "1", "", boundTo("n"), priority(2)))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{IntVal: 1}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}
	c := simFor(pod("p", "1", "", priority(10)), []*policyv1.PodDisruptionBudget{pdb}, n).selectVictims(n)
	if c == nil || !slices.Equal(victimNames(c), []string{"free"}) || c.pdbViolations != 0 {
		t.Fatalf("candidate = %+v", c)
	}
	// Without room for both, the guarded pod goes too and counts as a violation.
	c = simFor(pod("p", "2", "", priority(10)), []*policyv1.PodDisruptionBudget{pdb}, n).selectVictims(n)
	if c == nil || len(c.victims) != 2 || c.pdbViolations != 1 {
		t.Fatalf("candidate = %+v", c)
	}
}

func TestPickCandidateOrder(t *testing.T) {
	v := func(name string, prio int32, start int) *v1.Pod {
		return pod(name, "", "", priority(prio), startedAt(start))
	}
	for _, tc := range []struct {
		name  string
		cands []*candidate
		want  string
	}{
		{"fewest PDB violations", []*candidate{
			{node: "a", victims: []*v1.Pod{v("x", 1, 0)}, pdbViolations: 1},
			{node: "b", victims: []*v1.Pod{v("y", 5, 0), v("z", 5, 0)}}}, "b"},
		{"lowest highest-victim priority", []*candidate{
			{node: "a", victims: []*v1.Pod{v("x", 5, 0)}},
			{node: "b", victims: []*v1.Pod{v("y", 3, 0), v("z", 3, 0)}}}, "b"},
		{"lowest priority sum", []*candidate{
			{node: "a", victims: []*v1.Pod{v("x", 3, 0), v("w", 3, 0)}},
			{node: "b", victims: []*v1.Pod{v("y", 3, 0), v("z", 1, 0)}}}, "b"},
		{"fewest victims", []*candidate{
			{node: "a", victims: []*v1.Pod{v("x", -5, 0), v("w", -5, 0)}},
			{node: "b", victims: []*v1.Pod{v("y", -5, 0)}}}, "b"},
		{"latest start of the top victims", []*candidate{
			{node: "a", victims: []*v1.Pod{v("x", 3, 1)}},
			{node: "b", victims: []*v1.Pod{v("y", 3, 9)}}}, "b"},
	} {
		if got := pickCandidate(tc.cands); got == nil || got.node != tc.want {
			t.Errorf("%s: picked %v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEligibleToPreempt(t *testing.T) {
	never := v1.PreemptNever
	if ok, msg := eligibleToPreempt(pod("p", "1", "", func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never }), nil); ok || msg != msgNotEligibleNever {
		t.Fatalf("Never: %v %q", ok, msg)
	}
	terminating := pod("old", "1", "", boundTo("n"), priority(1), func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} })
	nodes := map[string]*nodeInfo{"n": infoFor(node("n", "1", "1Gi"), terminating)}
	nominated := pod("p", "1", "", priority(5), func(p *v1.Pod) { p.Status.NominatedNodeName = "n" })
	if ok, msg := eligibleToPreempt(nominated, nodes); ok || msg != msgNotEligibleTerminating {
		t.Fatalf("terminating victim: %v %q", ok, msg)
	}
	if ok, _ := eligibleToPreempt(pod("q", "1", "", priority(5)), nodes); !ok {
		t.Fatal("plain pod not eligible")
	}
}

func TestPriorityQueueOrder(t *testing.T) {
	prio := map[string]int32{"a": 1, "b": 10, "c": 1, "d": 5}
	q := newPriorityQueue(func(k string) int32 { return prio[k] })
	for _, k := range []string{"a", "b", "c", "d"} {
		q.Push(k)
	}
	var got []string
	for q.Len() > 0 {
		got = append(got, q.Pop())
	}
	if !slices.Equal(got, []string{"b", "d", "a", "c"}) {
		t.Fatalf("order = %v", got)
	}
}
