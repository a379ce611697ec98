package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/proxy/state"
	"github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestCompareUpstream runs nodekit's proxy and upstream kube-proxy (iptables mode), each in a network
// namespace of its own, against one real API server holding N Services × 3 endpoints, and prints both
// full-sync times and the time each takes to apply one Service change. It needs the upstream binary:
//
//	NODEKIT_UPSTREAM_KUBE_PROXY=/var/cache/nodekit/upstream/kube-proxy NODEKIT_BENCH_SERVICES=1000 \
//	  go test -run TestCompareUpstream -v -timeout 60m ./bench/proxy/
//
// kube-proxy's own figure is its "SyncProxyRules complete" elapsed (log level 2); nodekit's is its sync
// duration (state computation + rules + iptables-restore), the same scope.
func TestCompareUpstream(t *testing.T) {
	bin := os.Getenv("NODEKIT_UPSTREAM_KUBE_PROXY")
	if bin == "" {
		t.Skip("NODEKIT_UPSTREAM_KUBE_PROXY is not set to an upstream kube-proxy binary (built outside the repo)")
	}
	n := 1000
	if s := os.Getenv("NODEKIT_BENCH_SERVICES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("NODEKIT_BENCH_SERVICES=%q: %v", s, err)
		}
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
	start := time.Now()
	load(t, srv.Client, n)
	t.Logf("created %d Services and EndpointSlices in %s", n, time.Since(start).Round(time.Millisecond))

	nk := runNodekit(t, srv.Client, n)
	up := runUpstream(t, srv.Client, bin, srv.KubeconfigPath, n)
	fmt.Printf("\n%d Services × 3 endpoints, same API server, iptables %s\n", n, iptablesVersion())
	fmt.Printf("%-22s %-14s %-14s\n", "", "full sync", "one change")
	fmt.Printf("%-22s %-14s %-14s\n", "nodekit", nk[0].Round(time.Millisecond), nk[1].Round(time.Millisecond))
	fmt.Printf("%-22s %-14s %-14s\n", "kube-proxy v1.37.2", up[0].Round(time.Millisecond), up[1].Round(time.Millisecond))
	fmt.Printf("%-22s %-14.2f %-14.2f\n", "nodekit / upstream", float64(nk[0])/float64(up[0]), float64(nk[1])/float64(up[1]))
}

// load creates n Services with an EndpointSlice of 3 ready endpoints each, 8 writers at a time.
func load(t *testing.T, c kubernetes.Interface, n int) {
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
	for i := 0; i < n; i++ {
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

var tookRE = regexp.MustCompile(`took=([0-9.hmsuµn]+)`)

// runNodekit returns nodekit's first full sync with all Services and its sync after one change.
func runNodekit(t *testing.T, c kubernetes.Interface, n int) [2]time.Duration {
	netNS, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netNS.Close(); _ = testutils.UnmountNS(netNS) }()
	pr, pw := io.Pipe()
	p, err := proxy.New(proxy.Config{Client: c, NodeName: "bench-node", ClusterCIDR: "10.244.0.0/16", NetNS: netNS,
		MinSyncPeriod: time.Second, SyncPeriod: time.Hour, Logger: slog.New(slog.NewTextHandler(pw, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx); pw.Close() }()
	syncs := make(chan time.Duration, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := tookRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "msg=synced") {
				d, _ := time.ParseDuration(m[1])
				syncs <- d
			}
		}
	}()
	defer func() { cancel(); <-done }()
	// The API server's own "kubernetes" Service is synced too; wait for all n of the bench namespace.
	waitUntil(t, "nodekit full sync", func() bool { return benchPorts(p.Applied()) == n })
	full := <-syncs // the first sync runs after the caches synced: all n Services
	time.Sleep(3 * time.Second)
	for len(syncs) > 0 { // the informers' initial events cause one more (no-op) sync
		<-syncs
	}
	change(t, c, n/2, 1)
	one := <-syncs
	return [2]time.Duration{full, one}
}

// benchPorts counts the Service ports of the bench namespace in snap (nil: none synced yet).
func benchPorts(snap *state.Snapshot) int {
	if snap == nil {
		return 0
	}
	n := 0
	for _, sp := range snap.Ports {
		if sp.Name.Namespace == "bench" {
			n++
		}
	}
	return n
}

// tookRE and elapsedRE take Go durations such as 6m32.99s or 845.2ms.
//
// elapsedRE matches kube-proxy's IPv4 sync lines (klog puts the logger's ipFamily before the call's
// elapsed): kube-proxy syncs each IP family on its own, and only IPv4 has the bench's Services.
var elapsedRE = regexp.MustCompile(`"SyncProxyRules complete".* ipFamily="IPv4".* elapsed="([0-9.hmsuµn]+)"`)

// runUpstream runs kube-proxy in a network namespace and returns its first sync with all Services and its
// sync after one change, from its log.
func runUpstream(t *testing.T, c kubernetes.Interface, bin, kubeconfig string, n int) [2]time.Duration {
	netNS, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netNS.Close(); _ = testutils.UnmountNS(netNS) }()
	// kube-proxy runs wholly inside the namespace; it reaches the API server through a loopback relay there.
	kubeconfig = relayKubeconfig(t, netNS, kubeconfig)
	ctx, cancel := context.WithCancel(context.Background())
	// Port 0 is refused by kube-proxy's validation; the fixed ports are bound inside its own namespace.
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+netNS.Path(), bin,
		"--kubeconfig", kubeconfig, "--proxy-mode", "iptables", "--hostname-override", "bench-node",
		"--cluster-cidr", "10.244.0.0/16", "--conntrack-max-per-core", "0",
		"--iptables-min-sync-period", "1s", "--iptables-sync-period", "1h",
		"--metrics-bind-address", "0.0.0.0:10249", "--healthz-bind-address", "0.0.0.0:10256", "--v", "2")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	syncs := make(chan time.Duration, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "E") || strings.HasPrefix(l, "F") || strings.HasPrefix(l, "Error") {
				t.Log("kube-proxy:", l) // errors stay visible when it exits early
			}
			if m := elapsedRE.FindStringSubmatch(l); m != nil {
				d, _ := time.ParseDuration(m[1])
				syncs <- d
			}
		}
		close(syncs)
	}()
	// The full sync with all n Services is the first sync after the informers synced; kube-proxy may sync
	// earlier with partial caches, so take the longest of the first syncs within a quiet period.
	var full time.Duration
	deadline := time.After(30 * time.Minute)
	quiet := time.NewTimer(time.Hour)
	for {
		select {
		case d, ok := <-syncs:
			if !ok {
				t.Fatal("kube-proxy exited")
			}
			full = max(full, d)
			quiet.Reset(10 * time.Second)
			continue
		case <-quiet.C:
		case <-deadline:
			t.Fatal("kube-proxy did not sync within 30 minutes")
		}
		break
	}
	change(t, c, n/2, 2)
	select {
	case one := <-syncs:
		return [2]time.Duration{full, one}
	case <-time.After(10 * time.Minute):
		t.Fatal("kube-proxy did not apply the change")
	}
	return [2]time.Duration{}
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
