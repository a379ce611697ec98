package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func TestBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := point{start: t0, at: t0.Add(10 * time.Second), cpu: 1e9, memory: 1}
	last := point{start: t0, at: t0.Add(20 * time.Second), cpu: 6e9, memory: 5 << 20}
	u, err := between(last, prev)
	if err != nil {
		t.Fatal(err)
	}
	// 5 s of CPU over 10 s: half a core, 500000000n; memory is the last working set.
	if cpu := u.resources[corev1.ResourceCPU]; cpu.ScaledValue(-9) != 5e8 || cpu.Format != "DecimalSI" {
		t.Errorf("cpu = %s", cpu.String())
	}
	if mem := u.resources[corev1.ResourceMemory]; mem.String() != "5Mi" {
		t.Errorf("memory = %s", mem.String())
	}
	if !u.at.Equal(last.at) || u.window != 10*time.Second {
		t.Errorf("at %s window %s", u.at, u.window)
	}
	if _, err := between(prev, last); err == nil || !strings.Contains(err.Error(), "cumulative CPU usage went back") {
		t.Errorf("counter decrease: %v", err)
	}
	restarted := last
	restarted.start = t0.Add(-time.Second)
	if _, err := between(restarted, prev); err == nil {
		t.Error("start time going back: no error")
	}
}

func TestStore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ref := types.NamespacedName{Namespace: "ns", Name: "p"}
	p := &points{resolution: 15 * time.Second}
	batchAt := func(at time.Time, cpu uint64, start time.Time) batch {
		// the node's CPU counter grows by a core-second per second
		return batch{nodes: map[string]point{"n": {start: t0, at: at, cpu: uint64(at.Sub(t0).Seconds()) * 1e9, memory: 10}},
			pods: map[types.NamespacedName]map[string]point{ref: {"c": {start: start, at: at, cpu: cpu, memory: 20}}}}
	}
	// first scrape: one point, no metrics (the container started 1 s before: not fresh enough)
	p.store(batchAt(t0.Add(time.Minute), 1e9, t0.Add(59*time.Second)))
	if _, ok, _ := p.node("n"); ok {
		t.Error("node metrics after one scrape")
	}
	if _, _, ok, _ := p.pod(ref); ok {
		t.Error("pod metrics after one scrape")
	}
	// second scrape 15 s later: metrics over the 15 s window
	p.store(batchAt(t0.Add(75*time.Second), 4e9, t0.Add(59*time.Second)))
	u, ok, err := p.node("n")
	if !ok || err != nil || u.window != 15*time.Second {
		t.Fatalf("node: %+v %v %v", u, ok, err)
	}
	cs, earliest, ok, err := p.pod(ref)
	if !ok || err != nil || earliest.window != 15*time.Second || milliCPU(cs["c"]) != 200 {
		t.Fatalf("pod: %+v %+v %v %v", cs, earliest, ok, err)
	}
	// the container restarted (started after the last point): no previous point, no pod metrics
	p.store(batchAt(t0.Add(90*time.Second), 1e8, t0.Add(88*time.Second)))
	if _, _, ok, _ := p.pod(ref); ok {
		t.Error("pod metrics right after a restart")
	}
	if _, ok, _ := p.node("n"); !ok {
		t.Error("node lost its metrics")
	}
	// a container started 12 s before its first point (>= 10 s, < resolution) counts from its start
	fresh := types.NamespacedName{Namespace: "ns", Name: "fresh"}
	at := t0.Add(120 * time.Second)
	p.store(batch{pods: map[types.NamespacedName]map[string]point{fresh: {"c": {start: at.Add(-12 * time.Second), at: at, cpu: 6e9, memory: 1}}}})
	cs, earliest, ok, _ = p.pod(fresh)
	if !ok || earliest.window != 12*time.Second || milliCPU(cs["c"]) != 500 {
		t.Errorf("fresh container: %+v %+v %v", cs, earliest, ok)
	}
	// the same point again (an answer not newer than the last) keeps the previous point: same window
	p.resolution = 5 * time.Second // no longer fresh: the previous point must be the one kept
	p.store(batch{pods: map[types.NamespacedName]map[string]point{fresh: {"c": {start: at.Add(-12 * time.Second), at: at, cpu: 6e9, memory: 1}}}})
	if _, earliest, ok, _ := p.pod(fresh); !ok || earliest.window != 12*time.Second {
		t.Errorf("a repeated point: %+v %v", earliest, ok)
	}
}

func milliCPU(u usage) int64 {
	q := u.resources[corev1.ResourceCPU]
	return q.MilliValue()
}

// kubelet is a fake kubelet API serving /stats/summary with CPU counters the test advances.
type kubelet struct {
	mu       sync.Mutex
	nodeCPU  uint64
	ctrCPU   uint64
	requests int
	srv      *httptest.Server
}

func (k *kubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests++
	if r.URL.Path != "/stats/summary" {
		http.NotFound(w, r)
		return
	}
	now := metav1.Now()
	start := metav1.NewTime(time.Now().Add(-time.Hour))
	u64 := func(v uint64) *uint64 { return &v }
	json.NewEncoder(w).Encode(statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", StartTime: start,
			CPU: &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u64(k.nodeCPU)}, Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(1 << 30)}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Namespace: "default", Name: "web"}, Containers: []statsapi.ContainerStats{
			{Name: "b", StartTime: start, CPU: &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u64(k.ctrCPU)}, Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(3 << 20)}},
			{Name: "a", StartTime: start, CPU: &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u64(k.ctrCPU)}, Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(1 << 20)}},
		}}},
	})
}

func (k *kubelet) KubeletLocation(_ context.Context, node string) (*url.URL, http.RoundTripper, error) {
	u, _ := url.Parse(k.srv.URL)
	return u, k.srv.Client().Transport, nil
}

func (k *kubelet) advance(node, ctr uint64) {
	k.mu.Lock()
	k.nodeCPU += node
	k.ctrCPU += ctr
	k.mu.Unlock()
}

// objects is a fake node or pod storage over a fixed list, with label selectors.
type objects struct {
	rest.TableConvertor
	nodes []corev1.Node
	pods  []corev1.Pod
}

func (o *objects) New() runtime.Object { return &corev1.Node{} }
func (o *objects) Destroy()            {}
func (o *objects) NewList() runtime.Object {
	return &corev1.NodeList{}
}

func (o *objects) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	for i := range o.nodes {
		if o.nodes[i].Name == name {
			return &o.nodes[i], nil
		}
	}
	for i := range o.pods {
		if o.pods[i].Name == name && o.pods[i].Namespace == ns {
			return &o.pods[i], nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (o *objects) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	sel := labels.Everything()
	if opts != nil && opts.LabelSelector != nil {
		sel = opts.LabelSelector
	}
	if o.nodes != nil {
		out := &corev1.NodeList{}
		for _, n := range o.nodes {
			if sel.Matches(labels.Set(n.Labels)) {
				out.Items = append(out.Items, n)
			}
		}
		return out, nil
	}
	out := &corev1.PodList{}
	for _, p := range o.pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out.Items = append(out.Items, p)
		}
	}
	return out, nil
}

// TestScrapeAndServe scrapes a fake kubelet twice and reads NodeMetrics and PodMetrics through the REST
// storages: CPU from the counters' rate, the working sets, a NotReady node left out, selectors applied.
func TestScrapeAndServe(t *testing.T) {
	k := &kubelet{nodeCPU: 1e9, ctrCPU: 1e8}
	k.srv = httptest.NewTLSServer(k)
	defer k.srv.Close()
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	nodes := &objects{nodes: []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "down"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}},
	}}
	pods := &objects{pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}}}}}
	s := NewScraper(nodes, k, time.Minute, nil)
	st := Storage(s, nodes, pods)
	nodeREST, podREST := st["nodes"].(*NodeREST), st["pods"].(*PodREST)
	ctx := context.Background()
	podCtx := genericapirequest.WithNamespace(ctx, "default")

	s.Scrape(ctx)
	if k.requests != 1 {
		t.Fatalf("kubelet requests = %d, want 1 (the NotReady node is not scraped)", k.requests)
	}
	if _, err := nodeREST.Get(ctx, "n1", nil); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "nodemetrics.metrics.k8s.io") {
		t.Errorf("node metrics after one scrape: %v", err)
	}
	before := time.Now()
	k.advance(2e9, 5e8)
	time.Sleep(50 * time.Millisecond) // a window between the two scrapes; its length is measured, not assumed
	s.Scrape(ctx)

	obj, err := nodeREST.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nl := obj.(*metricsv1beta1.NodeMetricsList)
	if len(nl.Items) != 1 || nl.Items[0].Name != "n1" || nl.Items[0].Labels["pool"] != "a" {
		t.Fatalf("node metrics = %+v", nl.Items)
	}
	nm := nl.Items[0]
	w := nm.Window.Duration
	if w < 50*time.Millisecond || w > time.Since(before)+time.Second || nm.Timestamp.Time.Before(before.Add(-time.Second)) {
		t.Errorf("window %s timestamp %s", w, nm.Timestamp)
	}
	wantNano := int64(2e9 / w.Seconds())
	if got := nm.Usage.Cpu().ScaledValue(-9); got < wantNano-wantNano/100 || got > wantNano+wantNano/100 {
		t.Errorf("node cpu = %dn, want about %dn (2 s of CPU over %s)", got, wantNano, w)
	}
	if nm.Usage.Memory().Value() != 1<<30 {
		t.Errorf("node memory = %s", nm.Usage.Memory())
	}
	if obj, _ := nodeREST.List(ctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"pool": "b"})}); len(obj.(*metricsv1beta1.NodeMetricsList).Items) != 0 {
		t.Error("label selector pool=b matched n1")
	}
	if _, err := nodeREST.Get(ctx, "down", nil); !apierrors.IsNotFound(err) {
		t.Errorf("NotReady node: %v", err)
	}

	obj, err = podREST.Get(podCtx, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	pm := obj.(*metricsv1beta1.PodMetrics)
	if pm.Namespace != "default" || len(pm.Containers) != 2 || pm.Containers[0].Name != "a" || pm.Containers[1].Name != "b" ||
		pm.Containers[0].Usage.Memory().Value() != 1<<20 || pm.Containers[1].Usage.Memory().Value() != 3<<20 ||
		pm.Containers[0].Usage.Cpu().ScaledValue(-9) == 0 || pm.Window.Duration != w {
		t.Errorf("pod metrics = %+v", pm)
	}
	if _, err := podREST.Get(podCtx, "nope", nil); !apierrors.IsNotFound(err) {
		t.Errorf("missing pod: %v", err)
	}
	obj, err = podREST.List(ctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if err != nil || len(obj.(*metricsv1beta1.PodMetricsList).Items) != 1 {
		t.Errorf("pods app=web: %v %v", obj, err)
	}
}

// TestAddMergesSandboxes: a pod listed twice (an old ready sandbox with no running container, then
// the current one) keeps the current sandbox's containers.
func TestAddMergesSandboxes(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	ref := statsapi.PodReference{Namespace: "ns", Name: "p"}
	sum := &statsapi.Summary{Pods: []statsapi.PodStats{{PodRef: ref}, {PodRef: ref, Containers: []statsapi.ContainerStats{{Name: "c",
		CPU: &statsapi.CPUStats{UsageCoreNanoSeconds: u64(5)}, Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(7)}}}}}}
	b := batch{nodes: map[string]point{}, pods: map[types.NamespacedName]map[string]point{}}
	add(&b, "n", time.Now(), sum)
	if c, ok := b.pods[types.NamespacedName{Namespace: "ns", Name: "p"}]["c"]; !ok || c.cpu != 5 || c.memory != 7 {
		t.Errorf("pods = %+v", b.pods)
	}
	if len(b.nodes) != 0 {
		t.Errorf("a node without CPU stats got a point: %+v", b.nodes)
	}
}
