package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DefaultResolution is how often the Scraper reads the kubelets (metrics-server's --metric-resolution).
const DefaultResolution = 15 * time.Second

// maxSummaryBytes bounds one kubelet's /stats/summary answer.
const maxSummaryBytes = 32 << 20

// Kubelets locates a node's kubelet API and the transport that reaches it (the API server's verified
// kubelet client, as for logs and exec).
type Kubelets interface {
	KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}

// Scraper reads the kubelets' /stats/summary every Resolution and keeps the last two points of each
// node and container, from which the REST storages answer. Its zero value is not usable: use NewScraper.
type Scraper struct {
	nodes      rest.Lister
	kubelets   Kubelets
	resolution time.Duration
	log        *slog.Logger

	mu      sync.RWMutex
	points  points
	failing map[string]bool // nodes whose last scrape failed
}

// NewScraper returns a Scraper of the Ready nodes nodes lists (a *corev1.NodeList lister: the node
// storage), each reached through kubelets, every resolution (DefaultResolution when zero).
func NewScraper(nodes rest.Lister, kubelets Kubelets, resolution time.Duration, log *slog.Logger) *Scraper {
	if resolution <= 0 {
		resolution = DefaultResolution
	}
	if log == nil {
		log = slog.Default()
	}
	return &Scraper{nodes: nodes, kubelets: kubelets, resolution: resolution, log: log,
		points: points{resolution: resolution}, failing: map[string]bool{}}
}

// Run scrapes at once and then every resolution until ctx ends. Each scrape is bounded by 90% of the
// resolution, so scrapes never overlap.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.resolution)
	defer t.Stop()
	for {
		s.Scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Scrape reads every Ready node's kubelet once, in parallel, and stores the points. A node whose
// kubelet fails is left out of this batch (it then has no metrics until two more scrapes); the first
// failure is logged.
func (s *Scraper) Scrape(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.resolution*9/10)
	defer cancel()
	obj, err := s.nodes.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		s.log.Warn("metrics: list nodes", "err", err)
		return
	}
	var ready []string
	for _, n := range obj.(*corev1.NodeList).Items {
		if nodeReady(&n) {
			ready = append(ready, n.Name)
		}
	}
	summaries := make([]*statsapi.Summary, len(ready))
	times := make([]time.Time, len(ready))
	var wg sync.WaitGroup
	for i, name := range ready {
		wg.Go(func() {
			sum, at, err := s.summary(ctx, name)
			s.logResult(name, err)
			if err == nil {
				summaries[i], times[i] = sum, at
			}
		})
	}
	wg.Wait()
	b := batch{nodes: map[string]point{}, pods: map[types.NamespacedName]map[string]point{}}
	for i, sum := range summaries {
		if sum != nil {
			add(&b, ready[i], times[i], sum)
		}
	}
	s.mu.Lock()
	s.points.store(b)
	for n := range s.failing { // a node gone or NotReady is no longer reported as failing
		if !slices.Contains(ready, n) {
			delete(s.failing, n)
		}
	}
	s.mu.Unlock()
	s.log.Debug("metrics: scraped", "nodes", len(b.nodes), "pods", len(b.pods))
}

// logResult logs a node's first failed scrape and its first good one after failures (not every
// failure every resolution).
func (s *Scraper) logResult(node string, err error) {
	s.mu.Lock()
	was := s.failing[node]
	if err != nil {
		s.failing[node] = true
	} else {
		delete(s.failing, node)
	}
	s.mu.Unlock()
	switch {
	case err != nil && !was:
		s.log.Warn("metrics: scrape kubelet failed; the node has no metrics until it answers twice", "node", node, "err", err)
	case err == nil && was:
		s.log.Info("metrics: scrape kubelet succeeded again", "node", node)
	}
}

// summary GETs one node's /stats/summary; at is when its answer arrived, which is when the kubelet
// had measured (it reads the runtime's stats while answering).
func (s *Scraper) summary(ctx context.Context, node string) (sum *statsapi.Summary, at time.Time, err error) {
	loc, tr, err := s.kubelets.KubeletLocation(ctx, node)
	if err != nil {
		return nil, at, err
	}
	u := *loc
	u.Path, u.RawQuery = "/stats/summary", "only_cpu_and_memory=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, at, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, at, err
	}
	at = time.Now()
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSummaryBytes))
	if err != nil {
		return nil, at, fmt.Errorf("GET %s: %w", u.String(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, at, fmt.Errorf("GET %s: %s: %.200s", u.String(), resp.Status, body)
	}
	sum = &statsapi.Summary{}
	if err := json.Unmarshal(body, sum); err != nil {
		return nil, at, fmt.Errorf("GET %s: decode the summary: %w", u.String(), err)
	}
	return sum, at, nil
}

// add puts a summary's node and container points into b, under node (the name the summary was asked
// of, not the one it reports), measured at at: the summary's own times are whole seconds in JSON, too
// coarse for a rate over 15 s. Points without cumulative CPU or working set are left out.
func add(b *batch, node string, at time.Time, sum *statsapi.Summary) {
	if p, ok := toPoint(sum.Node.StartTime.Time, at, sum.Node.CPU, sum.Node.Memory); ok {
		b.nodes[node] = p
	}
	for _, ps := range sum.Pods {
		// a pod may be listed once per ready sandbox (an old one not yet removed): its running
		// containers are merged, the first of a name kept
		ref := types.NamespacedName{Namespace: ps.PodRef.Namespace, Name: ps.PodRef.Name}
		containers := b.pods[ref]
		if containers == nil {
			containers = map[string]point{}
		}
		for _, c := range ps.Containers {
			if _, seen := containers[c.Name]; seen {
				continue
			}
			if p, ok := toPoint(c.StartTime.Time, at, c.CPU, c.Memory); ok {
				containers[c.Name] = p
			}
		}
		b.pods[ref] = containers
	}
}

func toPoint(start, at time.Time, cpu *statsapi.CPUStats, mem *statsapi.MemoryStats) (point, bool) {
	if cpu == nil || cpu.UsageCoreNanoSeconds == nil || mem == nil || mem.WorkingSetBytes == nil {
		return point{}, false
	}
	return point{start: start, at: at, cpu: *cpu.UsageCoreNanoSeconds, memory: *mem.WorkingSetBytes}, true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
