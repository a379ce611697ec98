// Package proxy is nodekit's service proxy (the kube-proxy of a nodekit node). A Proxier watches Services and
// discovery.k8s.io/v1 EndpointSlices through client-go informers, computes the desired state
// (proxy/state) and has a backend program the kernel: iptables (proxy/iptables, the default), nftables
// (proxy/nftables) or IPVS (proxy/ipvs). The kernel forwards packets; the proxy only writes rules.
//
// Syncs are coalesced: any number of informer events between two syncs cause one sync, no two syncs start
// less than MinSyncPeriod apart, and a sync runs at least every SyncPeriod (kube-proxy's --min-sync-period
// and --sync-period). A sync writes only what changed since the last one; a full resync, which rewrites
// every rule and removes strays, runs first, after a failure, and every FullSyncPeriod. /metrics (kube-proxy's
// metric names) and /debug/services are served on MetricsAddr, /healthz and /livez (kube-proxy's JSON) on
// HealthzAddr.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/proxystatus"
	"github.com/nodekit/nodekit/proxy/iptables"
	"github.com/nodekit/nodekit/proxy/ipvs"
	"github.com/nodekit/nodekit/proxy/nftables"
	"github.com/nodekit/nodekit/proxy/state"
)

// Mode selects the backend.
type Mode string

// Proxy modes, as kube-proxy's --proxy-mode.
const (
	ModeIPTables Mode = "iptables"
	ModeIPVS     Mode = "ipvs"
	ModeNFTables Mode = "nftables"
)

// Modes lists every proxy mode, the default first.
var Modes = []Mode{ModeIPTables, ModeIPVS, ModeNFTables}

// Config configures a Proxier.
type Config struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// Mode is the backend; empty means iptables.
	Mode Mode
	// NodeName is this node's name, used for traffic policy Local; empty means os.Hostname().
	NodeName string
	// ClusterCIDR is the pod network (e.g. "10.244.0.0/16"); ClusterIP traffic from outside it is
	// masqueraded. Empty disables that rule.
	ClusterCIDR string
	// MinSyncPeriod is the least time between two syncs (default 1s); SyncPeriod the most time between two
	// syncs (default 30s).
	MinSyncPeriod, SyncPeriod time.Duration
	// MetricsAddr is the host:port serving /metrics and /debug/services (kube-proxy's default is
	// "127.0.0.1:10249"; port 0 picks one, see Proxier.Addr). Empty serves nothing.
	MetricsAddr string
	// HealthzAddr is the host:port serving /healthz and /livez (kube-proxy's --healthz-bind-address, default
	// "0.0.0.0:10256"; port 0 picks one, see Proxier.HealthzAddr). Empty serves nothing.
	HealthzAddr string
	// IPVSScheduler is the IPVS scheduler (rr, lc, sh, …); default rr. IPVS mode only.
	IPVSScheduler string
	// LocalhostNodePorts makes NodePorts answer on 127.0.0.0/8 too (iptables and nftables modes).
	LocalhostNodePorts bool
	// NetNS, when set, is the network namespace the rules are written in (tests run a "node" in a netns);
	// nil means the caller's.
	NetNS ns.NetNS
	// Logger receives one line per event; nil means slog.Default().
	Logger *slog.Logger
}

// FullSyncPeriod is how often a sync rewrites every rule instead of only the changed ones, repairing
// changes made behind the proxy's back (kube-proxy's hourly full resync).
const FullSyncPeriod = time.Hour

// backend is what a proxy mode does on each sync. rules reports the rule counts by kind for /metrics.
type backend interface {
	sync(ctx context.Context, snap *state.Snapshot, full bool) (rules map[string]int, err error)
}

type iptablesBackend struct{ s *iptables.Syncer }

func (b iptablesBackend) sync(ctx context.Context, snap *state.Snapshot, full bool) (map[string]int, error) {
	r, err := b.s.Sync(ctx, snap, full)
	return r.Rules, err
}

type nftablesBackend struct{ s *nftables.Syncer }

func (b nftablesBackend) sync(ctx context.Context, snap *state.Snapshot, full bool) (map[string]int, error) {
	r, err := b.s.Sync(ctx, snap, full)
	return r.Rules, err
}

type ipvsBackend struct{ s *ipvs.Syncer }

func (b ipvsBackend) sync(ctx context.Context, snap *state.Snapshot, full bool) (map[string]int, error) {
	r, err := b.s.Sync(ctx, snap, full)
	return r.Rules, err
}

// Proxier runs the proxy: informers, the sync loop and the HTTP endpoints.
type Proxier struct {
	cfg     Config
	log     *slog.Logger
	backend backend
	opts    state.Options
	cache   state.Cache // only the sync loop uses it
	metrics *metrics

	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	trigger  chan struct{}

	listener, healthzListener net.Listener

	mu           sync.Mutex
	lastSync     time.Time
	applied      *state.Snapshot
	programmed   []proxystatus.Service
	lastErr      error
	lastErrTime  time.Time
	lastProblems []state.Problem
	// oldestPending is when the oldest change not yet synced arrived (zero: none), as kube-proxy's healthz
	// tracks it; changesSeen holds the trigger times of the pending changes, for
	// kubeproxy_network_programming_duration_seconds.
	oldestPending time.Time
	changesSeen   []time.Time
}

// maxChangesSeen bounds the trigger times kept between two syncs.
const maxChangesSeen = 1000

// New validates cfg and prepares a Proxier; nothing is written to the kernel until Run. IPVS mode fails here
// when the kernel has no ip_vs. The /healthz and /metrics listener is opened here so Addr is known.
func New(cfg Config) (*Proxier, error) {
	if cfg.Client == nil {
		return nil, errors.New("proxy: Config.Client is required")
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeIPTables
	}
	if cfg.MinSyncPeriod <= 0 {
		cfg.MinSyncPeriod = time.Second
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	if cfg.MinSyncPeriod > cfg.SyncPeriod {
		return nil, fmt.Errorf("proxy: --min-sync-period %s exceeds --sync-period %s", cfg.MinSyncPeriod, cfg.SyncPeriod)
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("proxy: node name not given and hostname unknown: %w", err)
		}
		cfg.NodeName = strings.ToLower(h)
	}
	var cidr netip.Prefix
	if cfg.ClusterCIDR != "" {
		var err error
		if cidr, err = netip.ParsePrefix(cfg.ClusterCIDR); err != nil || !cidr.Addr().Is4() {
			return nil, fmt.Errorf("proxy: --cluster-cidr %q is not an IPv4 CIDR", cfg.ClusterCIDR)
		}
		cidr = cidr.Masked()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "proxy", "node", cfg.NodeName)
	p := &Proxier{cfg: cfg, log: log, opts: state.Options{NodeName: cfg.NodeName}, metrics: newMetrics(cfg.Mode), trigger: make(chan struct{}, 1)}

	err := p.inNetNS(func() error {
		switch cfg.Mode {
		case ModeIPTables:
			s, err := iptables.New(iptables.Config{ClusterCIDR: cidr, LocalhostNodePorts: cfg.LocalhostNodePorts}, log)
			if err != nil {
				return err
			}
			p.backend = iptablesBackend{s}
		case ModeIPVS:
			s, err := ipvs.New(ipvs.Config{ClusterCIDR: cidr, Scheduler: cfg.IPVSScheduler}, log)
			if err != nil {
				return err
			}
			p.backend = ipvsBackend{s}
		case ModeNFTables:
			s, err := nftables.New(nftables.Config{ClusterCIDR: cidr, LocalhostNodePorts: cfg.LocalhostNodePorts}, log)
			if err != nil {
				return err
			}
			p.backend = nftablesBackend{s}
		default:
			return fmt.Errorf("proxy: --proxy-mode %q is not iptables, ipvs or nftables", cfg.Mode)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Services and slices managed by another proxy are not ours (kube-proxy's label filters).
	p.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = "!service.kubernetes.io/service-proxy-name"
		}))
	svcInf := p.factory.Core().V1().Services()
	sliceInf := p.factory.Discovery().V1().EndpointSlices()
	p.services, p.slices = svcInf.Lister(), sliceInf.Lister()
	handler := func(endpoints bool) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { p.changed(endpoints, o) },
			UpdateFunc: func(_, o any) { p.changed(endpoints, o) },
			DeleteFunc: func(o any) { p.changed(endpoints, o) },
		}
	}
	if _, err := svcInf.Informer().AddEventHandler(handler(false)); err != nil {
		return nil, err
	}
	if _, err := sliceInf.Informer().AddEventHandler(handler(true)); err != nil {
		return nil, err
	}
	p.synced = []cache.InformerSynced{svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced}

	if cfg.MetricsAddr != "" {
		l, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("proxy: --metrics-bind-address %s: %w", cfg.MetricsAddr, err)
		}
		p.listener = l
	}
	if cfg.HealthzAddr != "" {
		l, err := net.Listen("tcp", cfg.HealthzAddr)
		if err != nil {
			if p.listener != nil {
				p.listener.Close()
			}
			return nil, fmt.Errorf("proxy: --healthz-bind-address %s: %w", cfg.HealthzAddr, err)
		}
		p.healthzListener = l
	}
	return p, nil
}

// Addr returns the address /metrics and /debug/services are served on, or "" when disabled.
func (p *Proxier) Addr() string {
	if p.listener == nil {
		return ""
	}
	return p.listener.Addr().String()
}

// HealthzAddr returns the address /healthz and /livez are served on, or "" when disabled.
func (p *Proxier) HealthzAddr() string {
	if p.healthzListener == nil {
		return ""
	}
	return p.healthzListener.Addr().String()
}

// changed records an informer event (a Service, or an EndpointSlice when endpoints) and asks for a sync.
// The change's trigger time is the EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time, as
// kube-proxy takes it, or now.
func (p *Proxier) changed(endpoints bool, obj any) {
	now := time.Now()
	seen := now
	if endpoints {
		p.metrics.endpointChanges.Inc()
		p.metrics.endpointPending.Inc()
		if es, ok := obj.(*discovery.EndpointSlice); ok {
			if t, err := time.Parse(time.RFC3339, es.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
				seen = t
			}
		}
	} else {
		p.metrics.serviceChanges.Inc()
		p.metrics.servicePending.Inc()
	}
	p.metrics.lastQueued.WithLabelValues(ipFamily).Set(float64(now.UnixNano()) / 1e9)
	p.mu.Lock()
	if p.oldestPending.IsZero() {
		p.oldestPending = now
	}
	if len(p.changesSeen) < maxChangesSeen {
		p.changesSeen = append(p.changesSeen, seen)
	}
	p.mu.Unlock()
	p.requestSync()
}

// Applied returns the desired state written by the last successful sync, conntrack cleanup included (nil
// before the first). Callers must not modify it.
func (p *Proxier) Applied() *state.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// LastSync returns when the last successful sync finished (zero before the first).
func (p *Proxier) LastSync() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSync
}

// Status returns what the last successful sync programmed (proxystatus.Status: every Service with its
// and its EndpointSlices' resourceVersions, the sync's time) and the last sync's error if it failed. The
// agent serves it on the kubelet API for `nodekit explain service`.
func (p *Proxier) Status() proxystatus.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := proxystatus.Status{Node: p.cfg.NodeName, Mode: string(p.cfg.Mode), LastSync: p.lastSync, Services: p.programmed}
	if p.lastErr != nil {
		st.LastError, st.LastErrorTime = p.lastErr.Error(), p.lastErrTime
	}
	return st
}

// programmedServices lists the Services one sync was computed from, each with the resourceVersions of
// its object and of its (non-headless) EndpointSlices, and the problems that skipped some of its ports.
func programmedServices(svcs []*v1.Service, sls []*discovery.EndpointSlice, probs []state.Problem) []proxystatus.Service {
	idx := make(map[types.NamespacedName]int, len(svcs))
	out := make([]proxystatus.Service, 0, len(svcs))
	for _, s := range svcs {
		idx[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = len(out)
		out = append(out, proxystatus.Service{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion})
	}
	for _, sl := range sls {
		i, ok := idx[types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[discovery.LabelServiceName]}]
		if !ok {
			continue
		}
		if out[i].EndpointSlices == nil {
			out[i].EndpointSlices = map[string]string{}
		}
		out[i].EndpointSlices[sl.Name] = sl.ResourceVersion
	}
	for _, pr := range probs {
		if i, ok := idx[pr.Service]; ok {
			out[i].Problems = append(out[i].Problems, strings.TrimPrefix(pr.Port+": "+pr.Reason, ": "))
		}
	}
	slices.SortFunc(out, func(a, b proxystatus.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

func (p *Proxier) requestSync() {
	select {
	case p.trigger <- struct{}{}:
	default: // a sync is already pending: this event is coalesced into it
	}
}

func (p *Proxier) inNetNS(f func() error) error {
	if p.cfg.NetNS == nil {
		return f()
	}
	return p.cfg.NetNS.Do(func(ns.NetNS) error { return f() })
}

// Run starts the informers, waits for their caches, serves HTTP and syncs until ctx ends. It returns nil
// when ctx is cancelled; the rules stay in place (use Cleanup to remove them).
func (p *Proxier) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	serve := func(l net.Listener, h http.Handler, what string) {
		if l == nil {
			return
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error(what+" server stopped", "err", err)
			}
		}()
		go func() { <-ctx.Done(); srv.Close() }()
	}
	serve(p.listener, p.metricsMux(), "metrics")
	serve(p.healthzListener, p.healthzMux(), "healthz")
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("proxy: informer caches did not sync")
	}
	p.log.Info("proxy started", "mode", p.cfg.Mode, "minSyncPeriod", p.cfg.MinSyncPeriod, "syncPeriod", p.cfg.SyncPeriod,
		"metricsAddr", p.Addr(), "healthzAddr", p.HealthzAddr())

	periodic := time.NewTimer(0) // the first sync runs at once
	defer periodic.Stop()
	var last, lastFull time.Time
	retry := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-periodic.C:
		}
		if wait := time.Until(last.Add(p.cfg.MinSyncPeriod)); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		select { // events that arrived while waiting are part of this sync
		case <-p.trigger:
		default:
		}
		last = time.Now()
		full := lastFull.IsZero() || last.Sub(lastFull) >= FullSyncPeriod
		if err := p.syncOnce(ctx, full); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The backend rewrites everything on the sync after a failure.
			retry = min(max(2*retry, p.cfg.MinSyncPeriod), p.cfg.SyncPeriod)
			p.log.Error("sync failed; will retry", "err", err, "retryIn", retry)
			periodic.Reset(retry)
			continue
		}
		retry = 0
		if full {
			lastFull = last
		}
		periodic.Reset(p.cfg.SyncPeriod)
	}
}

// syncOnce computes the desired state from the informer caches and applies it.
func (p *Proxier) syncOnce(ctx context.Context, full bool) error {
	start := time.Now()
	p.mu.Lock()
	seen := p.changesSeen
	p.changesSeen = nil
	p.mu.Unlock()
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return err
	}
	sls, err := p.slices.List(labels.Everything())
	if err != nil {
		return err
	}
	sls = slices.DeleteFunc(sls, func(s *discovery.EndpointSlice) bool {
		_, headless := s.Labels[v1.IsHeadlessService]
		return headless
	})
	snap := p.cache.Compute(svcs, sls, p.opts)
	p.reportProblems(snap.Problems)

	var rules map[string]int
	err = p.inNetNS(func() error {
		var err error
		rules, err = p.backend.sync(ctx, snap, full)
		return err
	})
	took := time.Since(start)
	now := time.Now()
	if err != nil {
		p.metrics.syncFailed(p.cfg.Mode)
		p.mu.Lock()
		p.lastErr, p.lastErrTime = err, now
		p.changesSeen = append(seen, p.changesSeen...) // still pending
		p.mu.Unlock()
		return err
	}
	programmed := programmedServices(svcs, sls, snap.Problems)
	p.mu.Lock()
	p.lastSync = now
	p.applied = snap
	p.programmed = programmed
	p.lastErr, p.lastErrTime = nil, time.Time{}
	// Changes that arrived during the sync may not be in it: they stay pending (healthz).
	if p.oldestPending.Before(start) {
		p.oldestPending = time.Time{}
		if len(p.changesSeen) > 0 {
			p.oldestPending = p.changesSeen[0]
		}
	}
	p.mu.Unlock()
	p.metrics.observeSync(p.cfg.Mode, full, took, now, rules, seen)
	p.log.Debug("synced", "full", full, "servicePorts", len(snap.Ports), "rules", rules, "took", took)
	return nil
}

// reportProblems logs each Service that cannot be proxied once, when it first appears, and exports the
// current set as nodekit_proxy_service_problems{service,port}.
func (p *Proxier) reportProblems(probs []state.Problem) {
	p.mu.Lock()
	old := p.lastProblems
	p.lastProblems = probs
	p.mu.Unlock()
	for _, pr := range probs {
		if !slices.Contains(old, pr) {
			p.log.Warn("service skipped", "service", pr.Service.String(), "port", pr.Port, "reason", pr.Reason)
		}
	}
	p.metrics.setProblems(probs)
}

func (p *Proxier) metricsMux() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("/metrics", p.metrics.handler())
	m.HandleFunc("/debug/services", p.debugServices)
	return m
}

func (p *Proxier) healthzMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { p.health(w, p.metrics.healthz) })
	m.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { p.health(w, p.metrics.livez) })
	return m
}

// proxyHealth is kube-proxy's healthz and livez body.
type proxyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	Healthy     bool      `json:"healthy"`
}

// health answers kube-proxy's /healthz and /livez: 503 when a change has waited for a sync longer than two
// sync periods (kube-proxy's healthTimeout), else 200. As kube-proxy, a healthy answer's lastUpdated is the
// current time (older clients read it as "the sync loop ran recently"); an unhealthy one's is the last
// successful sync. A proxy that has not synced yet and has nothing pending is healthy, as kube-proxy while
// it starts. nodekit does not watch its Node object, so the answer has no nodeEligible.
func (p *Proxier) health(w http.ResponseWriter, count *prometheus.CounterVec) {
	now := time.Now()
	p.mu.Lock()
	h := proxyHealth{LastUpdated: p.lastSync, CurrentTime: now,
		Healthy: p.oldestPending.IsZero() || now.Sub(p.oldestPending) < 2*p.cfg.SyncPeriod}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !h.Healthy {
		count.WithLabelValues("503").Inc()
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		count.WithLabelValues("200").Inc()
		h.LastUpdated = now
	}
	_ = json.NewEncoder(w).Encode(h)
}

// SyncedServicePort is one entry of /debug/services: a service port as the last successful sync wrote it.
type SyncedServicePort struct {
	// Service is "namespace/name", Port the Service port's name, Protocol TCP, UDP or SCTP.
	Service  string `json:"service"`
	Port     string `json:"port"`
	Protocol string `json:"protocol"`
	// ClusterIP and ServicePort are the ClusterIP and port the rules match; NodePort is 0 without one.
	ClusterIP   string `json:"clusterIP"`
	ServicePort int32  `json:"servicePort"`
	NodePort    int32  `json:"nodePort,omitempty"`
	// Endpoints counts the endpoints programmed (ready, or serving and terminating when none is ready).
	Endpoints int `json:"endpoints"`
}

// SyncedServices is the body of /debug/services on the metrics address: what the proxy's last successful
// sync programmed, and when it finished (zero before the first sync).
type SyncedServices struct {
	Mode     Mode                `json:"mode"`
	LastSync time.Time           `json:"lastSync"`
	Ports    []SyncedServicePort `json:"ports"`
}

// debugServices serves SyncedServices, optionally for one Service (?service=namespace/name).
func (p *Proxier) debugServices(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	snap, last := p.applied, p.lastSync
	p.mu.Unlock()
	out := SyncedServices{Mode: p.cfg.Mode, LastSync: last, Ports: []SyncedServicePort{}}
	only := r.URL.Query().Get("service")
	if snap != nil {
		for _, sp := range snap.Ports {
			name := sp.Name.Namespace + "/" + sp.Name.Name
			if only != "" && name != only {
				continue
			}
			out.Ports = append(out.Ports, SyncedServicePort{Service: name, Port: sp.Name.Port, Protocol: string(sp.Protocol),
				ClusterIP: sp.ClusterIP.String(), ServicePort: sp.Port, NodePort: sp.NodePort, Endpoints: len(sp.ClusterEndpoints())})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Cleanup removes every rule, chain, table, ipset and interface nodekit's proxy owns in any mode, in the
// network namespace of the caller (kube-proxy --cleanup). It works on a kernel without ip_vs too.
func Cleanup(ctx context.Context) error {
	return errors.Join(iptables.Cleanup(ctx), ipvs.Cleanup(ctx), nftables.Cleanup(ctx))
}
