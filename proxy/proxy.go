// Package proxy is nodekit's service proxy (the kube-proxy of a nodekit node). A Proxier watches Services and
// discovery.k8s.io/v1 EndpointSlices through client-go informers, computes the desired state
// (proxy/state) and has a backend program the kernel: iptables (proxy/iptables, the default), nftables
// (proxy/nftables) or IPVS (proxy/ipvs). The kernel forwards packets; the proxy only writes rules.
//
// Syncs are coalesced: any number of informer events between two syncs cause one sync, no two syncs start
// less than MinSyncPeriod apart, and a sync runs at least every SyncPeriod (kube-proxy's --min-sync-period
// and --sync-period). A sync writes only what changed since the last one; a full resync, which rewrites
// every rule and removes strays, runs first, after a failure, and every FullSyncPeriod. /healthz and /metrics are served on MetricsAddr.
package proxy

import (
	"context"
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
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

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
	// MetricsAddr is the host:port serving /healthz and /metrics (e.g. "127.0.0.1:10249"; port 0 picks one,
	// see Proxier.Addr). Empty serves nothing.
	MetricsAddr string
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

	listener net.Listener

	mu           sync.Mutex
	lastSync     time.Time
	applied      *state.Snapshot
	lastProblems []state.Problem
}

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
	p := &Proxier{cfg: cfg, log: log, opts: state.Options{NodeName: cfg.NodeName}, metrics: newMetrics(), trigger: make(chan struct{}, 1)}

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
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.requestSync() },
		UpdateFunc: func(any, any) { p.requestSync() },
		DeleteFunc: func(any) { p.requestSync() },
	}
	if _, err := svcInf.Informer().AddEventHandler(h); err != nil {
		return nil, err
	}
	if _, err := sliceInf.Informer().AddEventHandler(h); err != nil {
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
	return p, nil
}

// Addr returns the address /healthz and /metrics are served on, or "" when disabled.
func (p *Proxier) Addr() string {
	if p.listener == nil {
		return ""
	}
	return p.listener.Addr().String()
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
	if p.listener != nil {
		srv := &http.Server{Handler: p.mux(), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(p.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("metrics server stopped", "err", err)
			}
		}()
		defer srv.Close()
	}
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("proxy: informer caches did not sync")
	}
	p.log.Info("proxy started", "mode", p.cfg.Mode, "minSyncPeriod", p.cfg.MinSyncPeriod, "syncPeriod", p.cfg.SyncPeriod, "addr", p.Addr())

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
	if err != nil {
		p.metrics.syncErrors.Inc()
		return err
	}
	now := time.Now()
	p.mu.Lock()
	p.lastSync = now
	p.applied = snap
	p.mu.Unlock()
	p.metrics.observeSync(took, now, rules, len(snap.Ports))
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

func (p *Proxier) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/healthz", p.healthz)
	m.Handle("/metrics", p.metrics.handler())
	return m
}

// healthz answers 200 with the last sync time when a sync succeeded within two sync periods, else 503
// (kube-proxy's healthz contract: the node's rules are known to be fresh).
func (p *Proxier) healthz(w http.ResponseWriter, _ *http.Request) {
	last := p.LastSync()
	w.Header().Set("Content-Type", "application/json")
	healthy := !last.IsZero() && time.Since(last) <= 2*p.cfg.SyncPeriod
	if !healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	ts := ""
	if !last.IsZero() {
		ts = last.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "{\"lastSync\":%q,\"healthy\":%t,\"mode\":%q}\n", ts, healthy, p.cfg.Mode)
}

// Cleanup removes every rule, chain, table, ipset and interface nodekit's proxy owns in any mode, in the
// network namespace of the caller (kube-proxy --cleanup). It works on a kernel without ip_vs too.
func Cleanup(ctx context.Context) error {
	return errors.Join(iptables.Cleanup(ctx), ipvs.Cleanup(ctx), nftables.Cleanup(ctx))
}
