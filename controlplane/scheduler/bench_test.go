package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// BenchmarkFindNode times one scheduling cycle (filters and scores) over 100 nodes in 3 zones holding
// 3000 pods of 30 ReplicaSets, for a plain replica (system default spreading only), one with required
// anti-affinity by hostname and preferred affinity by zone, and one with a DoNotSchedule zone spread
// constraint. Run with go test -run '^$' -bench FindNode ./controlplane/scheduler/.
func BenchmarkFindNode(b *testing.B) {
	c := newCache()
	for i := range 100 {
		c.setNode(node(fmt.Sprintf("n%03d", i), "64", "256Gi", zone(fmt.Sprintf("z%d", i%3))))
	}
	for i := range 3000 {
		app := fmt.Sprintf("app%02d", i%30)
		p := pod(fmt.Sprintf("p%04d", i), "10m", "10Mi", withLabels("app", app), ownedBy(app), boundTo(fmt.Sprintf("n%03d", i%100)))
		if i%10 == 0 {
			requiredAnti(term(v1.LabelHostname, "app", app+"-x"))(p)
		}
		c.setPod(podKey(p), p)
	}
	lk := &fakeLookups{spreadSelector: labels.SelectorFromSet(labels.Set{"app": "app07"})}
	s := &Scheduler{cache: c, lookups: lk, filters: filters(logr.Discard()), rnd: rand.New(rand.NewPCG(1, 2))}
	cases := map[string]*v1.Pod{
		"plain": pod("new", "10m", "10Mi", withLabels("app", "app07"), ownedBy("app07")),
		"affinity": pod("new", "10m", "10Mi", withLabels("app", "app07"), ownedBy("app07"),
			requiredAnti(term(v1.LabelHostname, "app", "app07-other")), preferredAffinity(10, term(v1.LabelTopologyZone, "app", "app08"))),
		"spread": pod("new", "10m", "10Mi", withLabels("app", "app07"), ownedBy("app07"),
			spread(1, v1.LabelTopologyZone, v1.DoNotSchedule, nil, "app", "app07")),
	}
	for _, name := range []string{"plain", "affinity", "spread"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, fitErr := s.findNode(cases[name]); fitErr != nil {
					b.Fatal(fitErr)
				}
			}
		})
	}
}
