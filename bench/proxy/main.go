// Command proxy-bench measures a nodekit proxy backend (iptables or nftables) in a fresh network namespace: the full sync
// time for N Services × 3 endpoints (first sync into empty tables, and a full resync over existing rules as
// after a restart), and the time to apply one Service change (one endpoint replaced, a partial sync), and
// prints the figures. Usage (root): go run ./bench/proxy [-mode iptables|nftables] [-services 1000,10000] [-changes 5]
//
// The figures are what kube-proxy reports as sync_proxy_rules_duration_seconds: computing the desired state
// from Services and EndpointSlices, building the rules and writing them (iptables-restore, or nf_tables
// netlink transactions).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/proxy/iptables"
	"github.com/nodekit/nodekit/proxy/nftables"
	"github.com/nodekit/nodekit/proxy/state"
)

func main() {
	sizes := flag.String("services", "1000,10000", "comma-separated Service counts")
	changes := flag.Int("changes", 5, "single-Service changes to time per size (median printed)")
	flag.IntVar(&batchChains, "batch-chains", 0, "chains per iptables-restore run (0: the proxy's default, -1: one run per sync)")
	flag.StringVar(&mode, "mode", "iptables", "backend: iptables or nftables")
	flag.IntVar(&batchMessages, "batch-messages", 0, "netlink messages per nftables transaction (0: the proxy's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile (alloc_space) at the end of the run to this file")
	flag.Parse()
	if mode != "iptables" && mode != "nftables" {
		fail(fmt.Errorf("-mode %q is not iptables or nftables", mode))
	}
	// An interrupted run (a 10k sync can take minutes on a loaded box) ends iptables-restore and still
	// removes its namespace.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if mode == "nftables" {
		fmt.Println("nodekit proxy (nftables mode, nf_tables netlink) — Services × 3 endpoints, in a fresh network namespace")
	} else {
		fmt.Printf("nodekit proxy (iptables mode, %s) — Services × 3 endpoints, in a fresh network namespace\n", iptablesVersion())
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
			}
			if err != nil {
				fail(err)
			}
		}()
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("-services: %q is not a positive count", f))
		}
		if err := run(ctx, n, *changes); err != nil {
			fail(err)
		}
	}
}

var (
	batchChains   int
	batchMessages int
	mode          string
	lastCPU       time.Duration // CPU time of the last sync
)

// cpuTime returns the user + system CPU time of this process and its waited-for children (iptables-restore).
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// backend is one proxy backend under measurement: sync writes snap and describes what it wrote, with the
// number of chains it (re)wrote.
type backend func(ctx context.Context, snap *state.Snapshot, full bool) (what string, chainsWritten int, err error)

// newBackend returns a fresh Syncer of the -mode backend, as a proxy (re)start makes.
func newBackend() (backend, error) {
	if mode == "nftables" {
		s, err := nftables.New(nftables.Config{}, nil)
		if err != nil {
			return nil, err
		}
		s.BatchMessages = batchMessages
		return func(ctx context.Context, snap *state.Snapshot, full bool) (string, int, error) {
			r, err := s.Sync(ctx, snap, full)
			return fmt.Sprintf("%d rules, %d chains, %d map elements, %d netlink messages in %d transactions",
				r.Rules["rules"], r.Rules["chains"], r.Rules["elements"], r.Messages, r.Transactions), r.ChainsWritten, err
		}, nil
	}
	s, err := iptables.New(iptables.Config{BatchChains: batchChains}, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, snap *state.Snapshot, full bool) (string, int, error) {
		r, err := s.Sync(ctx, snap, full)
		return fmt.Sprintf("%d rules, %d chains, %d iptables-restore runs", r.Rules["nat"]+r.Rules["filter"], r.ChainsWritten, r.Batches),
			r.ChainsWritten, err
	}, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "proxy-bench:", err)
	os.Exit(1)
}

func iptablesVersion() string {
	out, _ := exec.Command("iptables", "--version").Output()
	return strings.TrimSpace(string(out))
}

// objects returns n Services, each with one TCP port and an EndpointSlice of 3 ready endpoints; endpoint
// addresses of Service i are derived from i and gen, so a new gen replaces them.
func objects(n int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	slices := make([]*discovery.EndpointSlice, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%d", i)
		svcs[i] = &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: v1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
		}
		slices[i] = slice(name, i, 0)
	}
	return svcs, slices
}

func slice(svc string, i, gen int) *discovery.EndpointSlice {
	es := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for e := 0; e < 3; e++ {
		es.Endpoints = append(es.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+(i*3+e)/65000%64, (i*3+e)/250%256, (i*3+e)%250+1+gen)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return es
}

func run(ctx context.Context, n, changes int) error {
	node, err := testutils.NewNS()
	if err != nil {
		return fmt.Errorf("network namespace (needs root): %w", err)
	}
	defer func() { _ = node.Close(); _ = testutils.UnmountNS(node) }()
	svcs, slices := objects(n)
	return node.Do(func(ns.NetNS) error {
		opts := state.Options{NodeName: "bench-node"}
		var cache state.Cache // as the proxy's: a change recomputes only its Service
		s, err := newBackend()
		if err != nil {
			return err
		}
		sync := func(syncer backend, full bool) (time.Duration, int, error) {
			start, cpu0 := time.Now(), cpuTime()
			snap := cache.Compute(svcs, slices, opts)
			what, written, err := syncer(ctx, snap, full)
			took := time.Since(start)
			// CPU time (user + system: nf_tables and iptables-restore work in the kernel counts) does not grow
			// with the machine's load the way wall time does.
			lastCPU = cpuTime() - cpu0
			if full && err == nil {
				fmt.Printf("%d services: %s\n", n, what)
			}
			return took, written, err
		}
		first, _, err := sync(s, true)
		if err != nil {
			return err
		}
		// Each figure is printed as soon as it is measured: a 10k run can take many minutes on a loaded box.
		fmt.Printf("%d services: first sync %s (CPU %s)\n", n, first.Round(time.Millisecond), lastCPU.Round(time.Millisecond))
		// A restart: a new Syncer rewrites every chain over the existing ones.
		s2, err := newBackend()
		if err != nil {
			return err
		}
		full, _, err := sync(s2, true)
		if err != nil {
			return err
		}
		fmt.Printf("%d services: full resync over existing rules %s (CPU %s)\n", n, full.Round(time.Millisecond), lastCPU.Round(time.Millisecond))
		var times, cpus []time.Duration
		for c := 0; c < changes; c++ {
			i := (c * 7919) % n
			slices[i] = slice(svcs[i].Name, i, c+1)
			d, written, err := sync(s2, false)
			if err != nil {
				return err
			}
			if written > 12 {
				return fmt.Errorf("one change rewrote %d chains; partial sync is not partial", written)
			}
			times = append(times, d)
			cpus = append(cpus, lastCPU)
			fmt.Printf("%d services: one change %s (CPU %s)\n", n, d.Round(time.Millisecond), lastCPU.Round(time.Millisecond))
		}
		sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
		sort.Slice(cpus, func(a, b int) bool { return cpus[a] < cpus[b] })
		p50 := times[len(times)/2]
		fmt.Printf("%d services: one change p50 %s (CPU p50 %s) = %.2f × full resync\n", n, p50.Round(time.Millisecond),
			cpus[len(cpus)/2].Round(time.Millisecond), float64(p50)/float64(full))
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			fmt.Printf("%d services: peak RSS of the bench process %d MiB\n", n, ru.Maxrss/1024)
		}
		return nil
	})
}
