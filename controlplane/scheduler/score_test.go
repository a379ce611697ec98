package scheduler

import (
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestScoreLeastAllocated(t *testing.T) {
	p := newPodInfo(pod("p", "1", "1Gi"))
	// 16 CPU / 16Gi left after the pod beats 12 / 12 (SYSTEM.md's "a node left with 16 beats 12").
	roomy := infoFor(node("roomy", "17", "17Gi"))
	tight := infoFor(node("tight", "13", "13Gi"))
	if r, tt := scoreLeastAllocated(p, roomy), scoreLeastAllocated(p, tight); r <= tt {
		t.Fatalf("roomy score %d not above tight score %d", r, tt)
	}
	// Exact value: 4 CPU / 4Gi node with 1 CPU / 1Gi already requested, pod adds 1/1: 2/4 left → 50.
	ni := infoFor(node("n", "4", "4Gi"), pod("q", "1", "1Gi", boundTo("n")))
	if got := scoreLeastAllocated(p, ni); got != 50 {
		t.Fatalf("score = %d, want 50", got)
	}
	// A pod without requests is scored at the default 100m / 200Mi.
	empty := newPodInfo(pod("e", "", ""))
	if empty.NonZero.MilliCPU != defaultMilliCPURequest || empty.NonZero.Memory != defaultMemoryRequest {
		t.Fatalf("non-zero requests = %+v", empty.NonZero)
	}
	if empty.Requests.MilliCPU != 0 || empty.Requests.Memory != 0 {
		t.Fatalf("filter requests of an empty pod = %+v, want zero", empty.Requests)
	}
	// Over-committed node scores 0, not negative.
	if got := scoreLeastAllocated(newPodInfo(pod("big", "8", "8Gi")), infoFor(node("s", "1", "1Gi"))); got != 0 {
		t.Fatalf("overcommitted score = %d, want 0", got)
	}
}

func TestScoreSpread(t *testing.T) {
	p := newPodInfo(pod("p", "", "", ownedBy("rs1")))
	a := infoFor(node("a", "4", "4Gi"), pod("x", "", "", ownedBy("rs1"), boundTo("a")), pod("y", "", "", ownedBy("rs1"), boundTo("a")))
	b := infoFor(node("b", "4", "4Gi"), pod("z", "", "", ownedBy("rs1"), boundTo("b")))
	c := infoFor(node("c", "4", "4Gi"), pod("w", "", "", ownedBy("other"), boundTo("c")))
	got := scoreSpread(p, []*nodeInfo{a, b, c})
	want := []int64{0, 50, 100}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spread scores = %v, want %v", got, want)
		}
	}
	// A pod without a controller gets the same spread score everywhere.
	for _, s := range scoreSpread(newPodInfo(pod("solo", "", "")), []*nodeInfo{a, b}) {
		if s != maxNodeScore {
			t.Fatalf("ownerless spread score %d, want %d", s, maxNodeScore)
		}
	}
}

func TestSelectHostSpreadsAndBreaksTiesRandomly(t *testing.T) {
	// Equal nodes: replicas of one ReplicaSet land one per node before doubling up.
	c := newCache()
	for _, n := range []string{"a", "b", "c"} {
		c.setNode(node(n, "4", "4Gi"))
	}
	counts := map[string]int{}
	for i := range 3 {
		p := pod("r"+string(rune('0'+i)), "100m", "100Mi", ownedBy("rs1"))
		nodes := []*nodeInfo{c.nodes["a"], c.nodes["b"], c.nodes["c"]}
		chosen := nodes[selectHost(newPodInfo(p), nodes, rand.New(rand.NewPCG(uint64(i), 7)))].Node.Name
		c.assume(podKey(p), p, chosen)
		counts[chosen]++
	}
	if len(counts) != 3 {
		t.Fatalf("3 replicas on 3 equal nodes landed %v, want one per node", counts)
	}
	// Ties: across seeds both of two identical nodes get chosen.
	seen := map[int]bool{}
	nodes := []*nodeInfo{infoFor(node("x", "4", "4Gi")), infoFor(node("y", "4", "4Gi"))}
	for seed := range uint64(64) {
		seen[selectHost(newPodInfo(pod("t", "", "")), nodes, rand.New(rand.NewPCG(seed, 1)))] = true
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("tie-break never chose one of two identical nodes: %v", seen)
	}
}

func TestFitErrorMessage(t *testing.T) {
	e := &fitError{NumAllNodes: 3, NodeReasons: map[string][]string{
		"n1": {"Insufficient cpu"},
		"n2": {"Insufficient cpu"},
		"n3": {"node(s) had untolerated taint {key: value}"},
	}}
	want := "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {key: value}."
	if got := e.Error(); got != want {
		t.Fatalf("message = %q\nwant      %q", got, want)
	}
	if got := (&fitError{NodeReasons: map[string][]string{}}).Error(); got != "0/0 nodes are available." {
		t.Fatalf("empty cluster message = %q", got)
	}
}

func TestCacheAssumeAndConfirm(t *testing.T) {
	c := newCache()
	c.setNode(node("n", "2", "2Gi"))
	p := pod("p", "1", "1Gi")
	c.assume("default/p", p, "n")
	if got := c.nodes["n"].Requested.MilliCPU; got != 1000 {
		t.Fatalf("assumed cpu = %d, want 1000", got)
	}
	// The informer still shows the pod unbound: the assumption stays.
	c.setPod("default/p", p)
	if !c.isAssumed("default/p") || c.nodes["n"].Requested.MilliCPU != 1000 {
		t.Fatal("unbound informer update dropped the assumption")
	}
	// The binding arrives: counted once, no longer assumed.
	bound := p.DeepCopy()
	bound.Spec.NodeName = "n"
	c.setPod("default/p", bound)
	if c.isAssumed("default/p") || c.nodes["n"].Requested.MilliCPU != 1000 || len(c.nodes["n"].Pods) != 1 {
		t.Fatalf("confirmed pod: assumed=%v cpu=%d pods=%d", c.isAssumed("default/p"), c.nodes["n"].Requested.MilliCPU, len(c.nodes["n"].Pods))
	}
	// The pod finishes: its requests are released.
	done := bound.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	c.setPod("default/p", done)
	if c.nodes["n"].Requested.MilliCPU != 0 || len(c.nodes["n"].Pods) != 0 {
		t.Fatalf("finished pod still counted: %+v", c.nodes["n"].Requested)
	}
	// A failed binding is forgotten.
	c.assume("default/q", pod("q", "1", ""), "n")
	c.forget("default/q")
	if c.nodes["n"].Requested.MilliCPU != 0 {
		t.Fatal("forgotten assumption still counted")
	}
}
