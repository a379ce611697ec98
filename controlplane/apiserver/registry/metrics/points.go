// Package metrics serves the resource metrics API, metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics
// (k8s.io/metrics' types, what `kubectl top` reads), from the API server itself: a Scraper reads every
// Ready node's kubelet /stats/summary once per resolution (15 s, metrics-server's default) and keeps the
// last two points of each node and container; the REST storages answer from those points, never by
// scraping per request.
//
// The figures are metrics-server's (sigs.k8s.io/metrics-server pkg/storage): CPU is the rate of the
// cumulative usageCoreNanoSeconds between the two points (nanocores), memory the last point's
// workingSetBytes; timestamp is the last point's time and window the time between the two points. A node
// or pod has metrics from its second scrape on (a container started within one resolution, and at least
// 10 s before the scrape, counts its start, with zero CPU used, as the first point); a pod has metrics
// only when each of its running containers has.
package metrics

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// point is one sample of a node or a container.
type point struct {
	// start is when the node booted or the container started: cumulative CPU was zero then.
	start time.Time
	// at is when the CPU was measured.
	at time.Time
	// cpu is the CPU used since start, in core-nanoseconds.
	cpu uint64
	// memory is the working set, in bytes.
	memory uint64
}

// batch is one scrape: a point per node (by name) and per pod (namespace/name) one per running container.
type batch struct {
	nodes map[string]point
	pods  map[types.NamespacedName]map[string]point
}

// usage is the resource usage between two points.
type usage struct {
	resources corev1.ResourceList
	at        time.Time
	window    time.Duration
}

// between computes the usage from prev to last: CPU in nanocores (a DecimalSI quantity of scale -9), the
// working set (BinarySI bytes). It fails when the counter or the start time went back (a restart not
// seen as one).
func between(last, prev point) (usage, error) {
	if last.start.Before(prev.start) {
		return usage{}, fmt.Errorf("start time went back from %s to %s", prev.start, last.start)
	}
	if last.cpu < prev.cpu {
		return usage{}, fmt.Errorf("cumulative CPU usage went back from %d to %d", prev.cpu, last.cpu)
	}
	window := last.at.Sub(prev.at)
	if window <= 0 {
		return usage{}, fmt.Errorf("no time between the points (%s, %s)", prev.at, last.at)
	}
	nanocores := float64(last.cpu-prev.cpu) / window.Seconds()
	return usage{
		resources: corev1.ResourceList{
			corev1.ResourceCPU:    quantity(uint64(nanocores), resource.DecimalSI, -9),
			corev1.ResourceMemory: quantity(last.memory, resource.BinarySI, 0),
		},
		at: last.at, window: window,
	}, nil
}

// quantity is val×10^scale; a value beyond int64 loses one decimal digit.
func quantity(val uint64, format resource.Format, scale resource.Scale) resource.Quantity {
	q := *resource.NewScaledQuantity(int64(val), scale)
	if val > math.MaxInt64 {
		q = *resource.NewScaledQuantity(int64(val/10), scale+1)
	}
	q.Format = format
	return q
}

// freshContainer is how long a container must have run before its start counts as a first point
// (metrics-server's freshContainerMinMetricsResolution).
const freshContainer = 10 * time.Second

// points holds the last two points of every node and container.
type points struct {
	resolution time.Duration
	lastNodes  map[string]point
	prevNodes  map[string]point
	lastPods   map[types.NamespacedName]map[string]point
	prevPods   map[types.NamespacedName]map[string]point
}

// store takes a new batch: each new point becomes the last; the former last becomes the previous one
// when the new point is newer (and, for a container, it has not restarted since).
func (p *points) store(b batch) {
	lastNodes, prevNodes := make(map[string]point, len(b.nodes)), make(map[string]point, len(b.nodes))
	for name, np := range b.nodes {
		lastNodes[name] = np
		if old, ok := p.lastNodes[name]; ok {
			if np.at.After(old.at) {
				prevNodes[name] = old
			} else if prev, ok := p.prevNodes[name]; ok && prev.at.Before(np.at) {
				prevNodes[name] = prev
			}
		}
	}
	lastPods := make(map[types.NamespacedName]map[string]point, len(b.pods))
	prevPods := make(map[types.NamespacedName]map[string]point, len(b.pods))
	for ref, containers := range b.pods {
		last, prev := make(map[string]point, len(containers)), make(map[string]point, len(containers))
		for name, np := range containers {
			last[name] = np
			age := np.at.Sub(np.start)
			if np.start.Before(np.at) && age < p.resolution && age >= freshContainer {
				first := np
				first.at, first.cpu = np.start, 0
				prev[name] = first
				continue
			}
			old, ok := p.lastPods[ref][name]
			if !ok || !np.start.Before(old.at) { // restarted since: no previous point
				continue
			}
			if np.at.After(old.at) {
				prev[name] = old
			} else if pp, ok := p.prevPods[ref][name]; ok && pp.at.Before(np.at) {
				prev[name] = pp
			}
		}
		lastPods[ref] = last
		if len(prev) > 0 {
			prevPods[ref] = prev
		}
	}
	p.lastNodes, p.prevNodes, p.lastPods, p.prevPods = lastNodes, prevNodes, lastPods, prevPods
}

// node returns a node's usage; false when it has no two points.
func (p *points) node(name string) (usage, bool, error) {
	last, ok := p.lastNodes[name]
	if !ok {
		return usage{}, false, nil
	}
	prev, ok := p.prevNodes[name]
	if !ok {
		return usage{}, false, nil
	}
	u, err := between(last, prev)
	return u, err == nil, err
}

// pod returns the usage of each of a pod's containers and the earliest of their timestamps (with its
// window); false when some container has no two points.
func (p *points) pod(ref types.NamespacedName) (map[string]usage, usage, bool, error) {
	last, ok := p.lastPods[ref]
	if !ok || len(last) == 0 {
		return nil, usage{}, false, nil
	}
	prev := p.prevPods[ref]
	out := make(map[string]usage, len(last))
	var earliest usage
	for name, lp := range last {
		pp, ok := prev[name]
		if !ok {
			return nil, usage{}, false, nil
		}
		u, err := between(lp, pp)
		if err != nil {
			return nil, usage{}, false, fmt.Errorf("container %s: %w", name, err)
		}
		out[name] = u
		if earliest.at.IsZero() || u.at.Before(earliest.at) {
			earliest = u
		}
	}
	return out, earliest, true, nil
}
