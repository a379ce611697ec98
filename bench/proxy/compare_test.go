package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestCompareUpstream runs four proxies one after the other, each as a process of its own in a network
// namespace of its own, against one real API server holding N Services × 3 endpoints: nodekit's proxy in
// iptables and nftables mode (`nodekit proxy`, built from this tree) and upstream kube-proxy v1.37.2 in
// iptables and nftables mode (built outside the repo by `make kube-proxy-upstream`). For each it prints the
// first sync, a full resync over existing rules (the process restarted), one Service change (p50 of 5) and
// the process's memory (RSS after the changes, and its peak). It needs the upstream binary:
//
//	make kube-proxy-upstream
//	NODEKIT_BENCH_SERVICES=1000,10000 go test -run TestCompareUpstream -v -timeout 120m ./bench/proxy/
//
// Every sync time is the proxy's own kubeproxy_sync_proxy_rules_duration_seconds (ip_family IPv4): the
// histogram's sum grows by the duration of each sync, read every 100 ms from /metrics (both proxies
// export it under the same name). The scope is the same for both: computing the state, building the rules
// and writing them to the kernel.
func TestCompareUpstream(t *testing.T) {
	bin := os.Getenv("NODEKIT_UPSTREAM_KUBE_PROXY")
	if bin == "" {
		bin = "/var/cache/nodekit/kube-proxy-v1.37.2/bin/kube-proxy"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("upstream kube-proxy not built (make kube-proxy-upstream, or NODEKIT_UPSTREAM_KUBE_PROXY): %v", err)
	}
	sizes := []int{1000}
	if s := os.Getenv("NODEKIT_BENCH_SERVICES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				t.Fatalf("NODEKIT_BENCH_SERVICES=%q: %q is not a positive count", s, f)
			}
			sizes = append(sizes, n)
		}
	}
	nodekit := filepath.Join(t.TempDir(), "nodekit")
	if out, err := exec.Command("go", "build", "-o", nodekit, "../../cmd/nodekit").CombinedOutput(); err != nil {
		t.Fatalf("build nodekit: %v\n%s", err, out)
	}
	srv := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	if _, err := srv.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.201.0.2"}}}}
	if _, err := srv.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxies := []struct {
		name string
		argv func(kubeconfig string) []string
	}{
		{"nodekit iptables", nodekitArgs(nodekit, "iptables")},
		{"nodekit nftables", nodekitArgs(nodekit, "nftables")},
		{"kube-proxy v1.37.2 iptables", upstreamArgs(bin, "iptables")},
		{"kube-proxy v1.37.2 nftables", upstreamArgs(bin, "nftables")},
	}
	loaded := 0
	var table []string
	for _, n := range sizes {
		start := time.Now()
		loadRange(t, srv.Client, loaded, n)
		loaded = max(loaded, n)
		t.Logf("%d Services and EndpointSlices in the API server (%s to create)", n, time.Since(start).Round(time.Millisecond))
		for _, p := range proxies {
			r := measure(t, srv.KubeconfigPath, p.argv, n)
			line := fmt.Sprintf("| %s | %s | %s | %s | %s | %.0f MiB (peak %.0f MiB) |", fmtCount(n), p.name,
				fmtDur(r.first), fmtDur(r.resync), fmtDur(r.change), r.rss, r.peak)
			fmt.Println(line)
			table = append(table, line)
		}
	}
	fmt.Printf("\nServices × 3 endpoints, same API server, %s, kernel %s\n", iptablesVersion(), kernelRelease())
	fmt.Println("| Services | proxy | first sync | full resync | one change (p50 of 5) | memory (RSS after the changes) |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for _, l := range table {
		fmt.Println(l)
	}
}

func nodekitArgs(bin, mode string) func(string) []string {
	return func(kubeconfig string) []string {
		return []string{bin, "proxy", "--kubeconfig", kubeconfig, "--proxy-mode", mode, "--hostname-override", "bench-node",
			"--cluster-cidr", "10.244.0.0/16", "--min-sync-period", "1s", "--sync-period", "1h",
			"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"}
	}
}

func upstreamArgs(bin, mode string) func(string) []string {
	return func(kubeconfig string) []string {
		// Port 0 is refused by kube-proxy's validation; the fixed ports are bound inside its own namespace.
		return []string{bin, "--kubeconfig", kubeconfig, "--proxy-mode", mode, "--hostname-override", "bench-node",
			"--cluster-cidr", "10.244.0.0/16", "--conntrack-max-per-core", "0",
			"--iptables-min-sync-period", "1s", "--iptables-sync-period", "1h",
			"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256", "--v", "1"}
	}
}

// result is one proxy's figures: first sync, full resync after a restart, one change (p50), RSS and peak
// RSS in MiB.
type result struct {
	first, resync, change time.Duration
	rss, peak             float64
}

var changeGen = 100

// measure runs argv in a fresh network namespace: its first sync, five changes, then a restart over the
// rules it wrote.
func measure(t *testing.T, kubeconfig string, argv func(string) []string, n int) result {
	netNS, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netNS.Close(); _ = testutils.UnmountNS(netNS) }()
	// The proxy runs wholly inside the namespace; it reaches the API server through a loopback relay there.
	kubeconfig = relayKubeconfig(t, netNS, kubeconfig)
	var r result
	p := startProxy(t, netNS, argv(kubeconfig))
	r.first = p.settle(t, 10*time.Second)
	var changes []time.Duration
	for c := 0; c < 5; c++ {
		changeGen++
		before := p.count
		change(t, p.client, (c*7919+n/2)%n, changeGen)
		d := p.next(t, before)
		changes = append(changes, d)
	}
	slices.Sort(changes)
	r.change = changes[len(changes)/2]
	r.rss, r.peak = p.memory(t)
	p.stop()
	p2 := startProxy(t, netNS, argv(kubeconfig))
	r.resync = p2.settle(t, 10*time.Second)
	p2.stop()
	return r
}

// running is one proxy process and its sync histogram as last read.
type running struct {
	cmd        *exec.Cmd
	netNS      ns.NetNS
	client     kubernetes.Interface
	sum        float64
	count      int
	lastChange time.Time
	done       chan struct{}
	log        *strings.Builder
}

func startProxy(t *testing.T, netNS ns.NetNS, argv []string) *running {
	cmd := exec.Command("nsenter", append([]string{"--net=" + netNS.Path()}, argv...)...)
	var log strings.Builder
	cmd.Stderr = &syncWriter{b: &log}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &running{cmd: cmd, netNS: netNS, done: make(chan struct{}), log: &log}
	go func() { _ = cmd.Wait(); close(r.done) }()
	t.Cleanup(r.stop)
	r.client = benchClient
	return r
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

func (r *running) stop() {
	if r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

var syncRE = regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_duration_seconds_(sum|count)\{ip_family="IPv4"\} ([0-9.e+-]+)$`)

// scrape reads the IPv4 sync histogram's sum and count from the proxy's /metrics inside its namespace.
func (r *running) scrape() (sum float64, count int, ok bool) {
	// The connection is made on the goroutine inside Do (its socket belongs to the namespace);
	// http.Transport would dial on a goroutine of its own, in the host's namespace.
	var body []byte
	_ = r.netNS.Do(func(ns.NetNS) error {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:10249", 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:10249/metrics", nil)
		req.Close = true
		if err := req.Write(conn); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err
	})
	found := 0
	for _, m := range syncRE.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "sum" {
			sum = v
		} else {
			count = int(v)
		}
		found++
	}
	return sum, count, found == 2
}

// poll reads the histogram and returns the duration of the syncs since the last poll (0 if none).
func (r *running) poll(t *testing.T) (time.Duration, int) {
	select {
	case <-r.done:
		t.Fatalf("%s exited:\n%s", r.cmd.Args[2], r.log.String())
	default:
	}
	sum, count, ok := r.scrape()
	if !ok || count == r.count {
		return 0, 0
	}
	d := time.Duration((sum - r.sum) * float64(time.Second))
	syncs := count - r.count
	r.sum, r.count = sum, count
	r.lastChange = time.Now()
	return d, syncs
}

// settle waits for the first syncs and returns the longest sync seen until none came for quiet (a proxy
// may sync with partial caches first; the full one is the longest).
func (r *running) settle(t *testing.T, quiet time.Duration) time.Duration {
	var longest time.Duration
	deadline := time.Now().Add(40 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if d, n := r.poll(t); n > 0 {
			longest = max(longest, d/time.Duration(n))
			if n > 1 {
				longest = max(longest, d) // two syncs in one poll: count them as one, an upper bound
			}
		}
		if r.count > 0 && time.Since(r.lastChange) > quiet {
			return longest
		}
	}
	t.Fatalf("%s did not settle within 40 minutes", r.cmd.Args[2])
	return 0
}

// next waits for the sync after count and returns its duration.
func (r *running) next(t *testing.T, count int) time.Duration {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if d, n := r.poll(t); n > 0 && r.count > count {
			// Let a trailing sync (the change's second event) land before the next change.
			time.Sleep(1500 * time.Millisecond)
			if d2, n2 := r.poll(t); n2 > 0 {
				d, n = d+d2, n+n2
			}
			return d / time.Duration(n)
		}
	}
	t.Fatalf("%s did not apply a change within 10 minutes", r.cmd.Args[2])
	return 0
}

// memory returns the process's resident set and its peak, in MiB (kube-proxy runs as the direct child of
// nsenter, which execs it).
func (r *running) memory(t *testing.T) (rss, peak float64) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseFloat(f[1], 64)
			if f[0] == "VmRSS:" {
				rss = kb / 1024
			} else {
				peak = kb / 1024
			}
		}
	}
	return rss, peak
}

var benchClient kubernetes.Interface

func fmtCount(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return strconv.Itoa(n)
}

func fmtDur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func kernelRelease() string {
	out, _ := exec.Command("uname", "-r").Output()
	return strings.TrimSpace(string(out))
}

// loadRange creates Services from..n-1 with an EndpointSlice of 3 ready endpoints each, 8 writers at a time.
func loadRange(t *testing.T, c kubernetes.Interface, from, n int) {
	benchClient = c
	if from >= n {
		return
	}
	svcs, slices := objects(n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s := svcs[i].DeepCopy()
				s.Spec.ClusterIP = "" // allocated by the API server
				if _, err := c.CoreV1().Services("bench").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if _, err := c.DiscoveryV1().EndpointSlices("bench").Create(context.Background(), slices[i], metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := from; i < n; i++ {
		select {
		case work <- i:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// change replaces the endpoints of one Service.
func change(t *testing.T, c kubernetes.Interface, i, gen int) {
	name := fmt.Sprintf("svc-%d", i)
	cur, err := c.DiscoveryV1().EndpointSlices("bench").Get(context.Background(), name+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := slice(name, i, gen)
	next.ResourceVersion = cur.ResourceVersion
	if _, err := c.DiscoveryV1().EndpointSlices("bench").Update(context.Background(), next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// relayKubeconfig listens on 127.0.0.1 inside netNS, forwards each connection to the API server of
// kubeconfig in the host namespace, and returns a copy of kubeconfig pointing at the relay (the server
// certificate covers 127.0.0.1, so TLS verifies unchanged). The listener closes with the test.
func relayKubeconfig(t *testing.T, netNS ns.NetNS, kubeconfig string) string {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	err = netNS.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatalf("relay in the kube-proxy namespace: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	for name, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		target := u.Host
		go func() {
			for {
				in, err := ln.Accept()
				if err != nil {
					return // the test ended
				}
				go func() {
					defer in.Close()
					out, err := net.Dial("tcp", target) // from the host namespace
					if err != nil {
						return
					}
					defer out.Close()
					go func() { _, _ = io.Copy(out, in) }()
					_, _ = io.Copy(in, out)
				}()
			}
		}()
		cfg.Clusters[name].Server = "https://" + ln.Addr().String()
		break // the test API server's kubeconfig has one cluster
	}
	path := filepath.Join(t.TempDir(), "kube-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
