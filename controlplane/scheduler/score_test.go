package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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

func TestScoreTopologySpread(t *testing.T) {
	zoneA1 := infoFor(node("a1", "4", "4Gi", zone("a")), pod("x1", "", "", withLabels("app", "x"), boundTo("a1")), pod("x2", "", "", withLabels("app", "x"), boundTo("a1")))
	zoneA2 := infoFor(node("a2", "4", "4Gi", zone("a")))
	zoneB := infoFor(node("b", "4", "4Gi", zone("b")))
	noZone := infoFor(node("nz", "4", "4Gi"))
	cluster := []*nodeInfo{zoneA1, zoneA2, zoneB, noZone}
	selX := labels.SelectorFromSet(labels.Set{"app": "x"})
	r1 := infoFor(node("r1", "4", "4Gi"), pod("p1", "", "", withLabels("app", "x"), boundTo("r1")), pod("p2", "", "", withLabels("app", "x"), boundTo("r1")))
	r2 := infoFor(node("r2", "4", "4Gi"), pod("p3", "", "", withLabels("app", "x"), boundTo("r2")))
	r3 := infoFor(node("r3", "4", "4Gi"), pod("p4", "", "", withLabels("app", "x"), inNamespace("other"), boundTo("r3")))
	cases := []struct {
		name     string
		pod      *v1.Pod
		lk       *fakeLookups
		nodes    []*nodeInfo
		feasible []*nodeInfo
		want     []int64
	}{
		// zone a holds 2 matching pods, zone b none: raw 2×ln(4)+0 → 3 and 0; 100×(3+0−raw)/3. The
		// node without a zone label is ignored by explicit constraints (0).
		{"ScheduleAnyway by zone", pod("p", "", "", withLabels("app", "x"), spread(1, v1.LabelTopologyZone, v1.ScheduleAnyway, nil, "app", "x")),
			nil, cluster, cluster, []int64{0, 0, 100, 0}},
		// DoNotSchedule constraints do not score: every node scores 100.
		{"DoNotSchedule only", pod("p", "", "", withLabels("app", "x"), spread(1, v1.LabelTopologyZone, v1.DoNotSchedule, nil, "app", "x")),
			nil, cluster, cluster, []int64{100, 100, 100, 100}},
		// System defaults (hostname maxSkew 3, zone maxSkew 5) with the selector of the pod's
		// ReplicaSet: 2, 1 and 0 matching pods (the other namespace's pod does not count) give raw
		// 2×ln(5)+2 → 5, 1×ln(5)+2 → 4 and 2; the zone constraint is skipped on nodes without zones.
		{"system defaults by hostname", pod("p", "", "", withLabels("app", "x"), ownedBy("rs")),
			&fakeLookups{spreadSelector: selX}, []*nodeInfo{r1, r2, r3}, []*nodeInfo{r1, r2, r3}, []int64{40, 60, 100}},
		{"no default selector", pod("p", "", "", withLabels("app", "x")),
			&fakeLookups{}, []*nodeInfo{r1, r2, r3}, []*nodeInfo{r1, r2, r3}, []int64{100, 100, 100}},
		// Pods on nodes that are not feasible still count in their zone: only a2 and b are feasible.
		{"infeasible nodes count in their domain", pod("p", "", "", withLabels("app", "x"), spread(1, v1.LabelTopologyZone, v1.ScheduleAnyway, nil, "app", "x")),
			nil, cluster, []*nodeInfo{zoneA2, zoneB}, []int64{0, 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scoreTopologySpread(cycleFor(tc.pod, tc.lk, tc.nodes...), tc.feasible)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scores = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScoreInterPodAffinity(t *testing.T) {
	db := pod("db", "", "", withLabels("app", "db"), boundTo("b"))
	a1 := infoFor(node("a1", "4", "4Gi", zone("a")))
	a2 := infoFor(node("a2", "4", "4Gi", zone("a")))
	b := infoFor(node("b", "4", "4Gi", zone("b")), db)
	cluster := []*nodeInfo{a1, a2, b}
	picky := pod("picky", "", "", withLabels("app", "picky"), boundTo("a1"),
		preferredAnti(10, term(v1.LabelHostname, "app", "web")), requiredAffinity(term(v1.LabelTopologyZone, "app", "web")))
	withPicky := []*nodeInfo{infoFor(a1.Node, picky), a2, b}
	cases := []struct {
		name  string
		pod   *v1.Pod
		nodes []*nodeInfo
		want  []int64
	}{
		{"no terms anywhere", pod("p", "", "", withLabels("app", "web")), cluster, []int64{0, 0, 0}},
		{"preferred affinity to the db's zone", pod("p", "", "", preferredAffinity(50, term(v1.LabelTopologyZone, "app", "db"))), cluster, []int64{0, 0, 100}},
		{"preferred anti-affinity to the db's zone", pod("p", "", "", preferredAnti(50, term(v1.LabelTopologyZone, "app", "db"))), cluster, []int64{100, 100, 0}},
		// Affinity 80 to the db's zone and anti-affinity 20 to hostname b: b = 80−20 = 60 > 0.
		{"weights add up", pod("p", "", "", preferredAffinity(80, term(v1.LabelTopologyZone, "app", "db")),
			preferredAnti(20, term(v1.LabelHostname, "app", "db"))), cluster, []int64{0, 0, 100}},
		{"other namespace does not match", pod("p", "", "", inNamespace("other"), preferredAffinity(50, term(v1.LabelTopologyZone, "app", "db"))), cluster, []int64{0, 0, 0}},
		// The existing pod on a1 prefers no web pod on its host (−10 on a1) and requires web pods in
		// its zone (+1 hard weight on zone a): a1 = −9, a2 = 1, b = 0.
		{"existing pods' terms", pod("p", "", "", withLabels("app", "web")), withPicky, []int64{0, 100, 90}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := scoreInterPodAffinity(cycleFor(tc.pod, nil, tc.nodes...), tc.nodes); !slices.Equal(got, tc.want) {
				t.Fatalf("scores = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectHostSpreadsAndBreaksTiesRandomly(t *testing.T) {
	// Equal nodes: replicas of one ReplicaSet land one per node before doubling up (system default
	// spreading by hostname with the ReplicaSet's selector).
	c := newCache()
	for _, n := range []string{"a", "b", "c"} {
		c.setNode(node(n, "4", "4Gi"))
	}
	lk := &fakeLookups{spreadSelector: labels.SelectorFromSet(labels.Set{"app": "r"})}
	counts := map[string]int{}
	for i := range 3 {
		p := pod("r"+string(rune('0'+i)), "100m", "100Mi", withLabels("app", "r"), ownedBy("rs1"))
		nodes := []*nodeInfo{c.nodes["a"], c.nodes["b"], c.nodes["c"]}
		best, err := selectHost(cycleFor(p, lk, nodes...), nodes, rand.New(rand.NewPCG(uint64(i), 7)))
		if err != nil {
			t.Fatal(err)
		}
		c.assume(podKey(p), p, nodes[best].Node.Name)
		counts[nodes[best].Node.Name]++
	}
	if len(counts) != 3 {
		t.Fatalf("3 replicas on 3 equal nodes landed %v, want one per node", counts)
	}
	// Ties: across seeds both of two identical nodes get chosen.
	seen := map[int]bool{}
	nodes := []*nodeInfo{infoFor(node("x", "4", "4Gi")), infoFor(node("y", "4", "4Gi"))}
	for seed := range uint64(64) {
		best, err := selectHost(cycleFor(pod("t", "", ""), nil, nodes...), nodes, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		seen[best] = true
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("tie-break never chose one of two identical nodes: %v", seen)
	}
}

// TestSelectHostWeighsAffinityOverRoom: a preferred affinity (weight 2 × 100) outweighs a node with
// much more room (least allocated, weight 1).
func TestSelectHostWeighsAffinityOverRoom(t *testing.T) {
	busy := infoFor(node("busy", "4", "4Gi"), pod("db", "3", "3Gi", withLabels("app", "db"), boundTo("busy")))
	idle := infoFor(node("idle", "64", "64Gi"))
	nodes := []*nodeInfo{busy, idle}
	p := pod("p", "100m", "100Mi", preferredAffinity(1, term(v1.LabelHostname, "app", "db")))
	best, err := selectHost(cycleFor(p, nil, nodes...), nodes, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if nodes[best].Node.Name != "busy" {
		t.Fatalf("chose %s, want busy (preferred affinity)", nodes[best].Node.Name)
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
	pre := &fitError{NumAllNodes: 2, PreFilterMsg: "spec.topologySpreadConstraints[0].labelSelector: bad"}
	if got, want := pre.Error(), "0/2 nodes are available: spec.topologySpreadConstraints[0].labelSelector: bad."; got != want {
		t.Fatalf("prefilter message = %q, want %q", got, want)
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

func TestScoreNodeAffinityAndTaints(t *testing.T) {
	ssd := infoFor(node("ssd", "4", "4Gi", func(n *v1.Node) { n.Labels["disk"] = "ssd"; n.Labels["net"] = "fast" }))
	hdd := infoFor(node("hdd", "4", "4Gi", func(n *v1.Node) { n.Labels["disk"] = "hdd"; n.Labels["net"] = "fast" }))
	bare := infoFor(node("bare", "4", "4Gi"))
	nodes := []*nodeInfo{ssd, hdd, bare}
	pref := func(weight int32, key, value string) v1.PreferredSchedulingTerm {
		return v1.PreferredSchedulingTerm{Weight: weight, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: key, Operator: v1.NodeSelectorOpIn, Values: []string{value}}}}}
	}
	p := pod("p", "", "", func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
			pref(60, "disk", "ssd"), pref(20, "net", "fast")}}}
	})
	// ssd matches both (80), hdd one (20), bare none: 100, 25, 0.
	got, err := scoreNodeAffinity(newPodInfo(p), nodes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{100, 25, 0}; !slices.Equal(got, want) {
		t.Fatalf("node affinity scores = %v, want %v", got, want)
	}
	if got, _ := scoreNodeAffinity(newPodInfo(pod("q", "", "")), nodes); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Fatalf("no preferences: %v", got)
	}

	soft := func(keys ...string) func(*v1.Node) {
		return func(n *v1.Node) {
			for _, k := range keys {
				n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectPreferNoSchedule})
			}
		}
	}
	tainted := []*nodeInfo{infoFor(node("two", "4", "4Gi", soft("a", "b"))), infoFor(node("one", "4", "4Gi", soft("a"))), infoFor(node("none", "4", "4Gi"))}
	// 2, 1 and 0 untolerated PreferNoSchedule taints: 0, 50, 100.
	if got, want := scoreTaintToleration(logr.Discard(), newPodInfo(pod("p", "", "")), tainted), []int64{0, 50, 100}; !slices.Equal(got, want) {
		t.Fatalf("taint scores = %v, want %v", got, want)
	}
	// Tolerating "b" (no effect: every effect) leaves one taint on each tainted node.
	tol := pod("p", "", "", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "b", Operator: v1.TolerationOpExists}} })
	if got, want := scoreTaintToleration(logr.Discard(), newPodInfo(tol), tainted), []int64{0, 0, 100}; !slices.Equal(got, want) {
		t.Fatalf("taint scores with toleration = %v, want %v", got, want)
	}
}
