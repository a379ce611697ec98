package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/proxy/internal/testns"
	"github.com/nodekit/nodekit/proxy/ipvs"
	"github.com/nodekit/nodekit/proxy/nftables"
	"github.com/nodekit/nodekit/proxy/state"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func service(name, ip string, port int32, proto v1.Protocol) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Name: "p", Port: port, Protocol: proto}}},
	}
}

func endpointSlice(svc, ip string) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints:   []discovery.Endpoint{{Addresses: []string{ip}}},
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func start(t *testing.T, cfg Config) *Proxier {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// eachMode runs test as one subtest per proxy mode; a mode the kernel cannot run (IPVS without ip_vs) is
// skipped with the reason.
func eachMode(t *testing.T, test func(*testing.T, Mode)) {
	for _, m := range Modes {
		t.Run(string(m), func(t *testing.T) {
			if m == ModeIPVS {
				if err := ipvs.Available(); err != nil {
					t.Skip(err)
				}
			}
			test(t, m)
		})
	}
}

// programmed returns what the mode wrote in node, as the mode's own listing tool prints it, and the lines
// that show a Service programmed to an endpoint and a Service rejected for lack of endpoints.
func programmed(t *testing.T, node ns.NetNS, mode Mode) (listing, toEndpoint, rejected string) {
	t.Helper()
	cmd := []string{"iptables-save"}
	toEndpoint = "--to-destination 10.244.0.5:8080"
	rejected = `-d 10.96.0.4/32 -p tcp -m tcp --dport 80 -m comment --comment "default/unresolved:p/TCP has no endpoints" -j REJECT`
	switch mode {
	case ModeNFTables:
		cmd = []string{"nft", "list", "table", "ip", nftables.TableName}
		toEndpoint, rejected = "dnat to 10.244.0.5:8080", "10.96.0.4 . tcp . 80 : goto reject-chain"
	case ModeIPVS:
		cmd = []string{"ipvsadm", "-Ln"}
		toEndpoint, rejected = "10.244.0.5:8080", "" // IPVS has no virtual server for the port
	}
	if _, err := exec.LookPath(cmd[0]); err != nil {
		t.Skipf("%s not installed: the test reads the rules with it", cmd[0])
	}
	var out []byte
	if err := node.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command(cmd[0], cmd[1:]...).Output()
		return err
	}); err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return string(out), toEndpoint, rejected
}

// TestBadServicesDoNotBreakOthers: Services the API server would normally refuse (port 0, an unknown
// protocol) and one whose targetPort name no endpoint has are reported by name in the log and in
// nodekit_proxy_service_problems, while the good Service next to them is programmed; kube-proxy's metrics,
// /healthz and /livez on their own port, and /debug/services report the sync.
func TestBadServicesDoNotBreakOthers(t *testing.T) { eachMode(t, testBadServicesDoNotBreakOthers) }

func testBadServicesDoNotBreakOthers(t *testing.T, mode Mode) {
	node := testns.New(t)
	client := fake.NewClientset(
		service("bad-port", "10.96.0.2", 0, v1.ProtocolTCP),
		service("bad-proto", "10.96.0.3", 80, "ICMP"),
		service("unresolved", "10.96.0.4", 80, v1.ProtocolTCP),
		service("good", "10.96.0.5", 80, v1.ProtocolTCP),
	)
	unresolved := endpointSlice("unresolved", "10.244.0.4")
	unresolved.Ports[0].Name = ptr.To("other")
	for _, s := range []*discovery.EndpointSlice{unresolved, endpointSlice("good", "10.244.0.5")} {
		if _, err := client.DiscoveryV1().EndpointSlices("default").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	p := start(t, Config{Client: client, Mode: mode, NodeName: "n1", NetNS: node, MinSyncPeriod: 10 * time.Millisecond,
		MetricsAddr: "127.0.0.1:0", HealthzAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitFor(t, "first sync", func() bool { return p.Applied() != nil })

	saved, toEndpoint, rejected := programmed(t, node, mode)
	if !strings.Contains(saved, toEndpoint) {
		t.Errorf("good Service not programmed:\n%s", saved)
	}
	if rejected != "" && !strings.Contains(saved, rejected) {
		t.Errorf("unresolved Service not rejected:\n%s", saved)
	}
	// Informer handlers run after the caches report synced: wait until every creation is counted.
	waitFor(t, "changes counted", func() bool {
		_, m := get(t, "http://"+p.Addr()+"/metrics")
		return strings.Contains(m, "kubeproxy_sync_proxy_rules_service_changes_total 4") &&
			strings.Contains(m, "kubeproxy_sync_proxy_rules_endpoint_changes_total 2")
	})
	_, metrics := get(t, "http://"+p.Addr()+"/metrics")
	for _, svc := range []string{"default/bad-port", "default/bad-proto", "default/unresolved"} {
		if !strings.Contains(metrics, fmt.Sprintf(`nodekit_proxy_service_problems{port="p",service=%q} 1`, svc)) {
			t.Errorf("metrics lack the problem of %s:\n%s", svc, metrics)
		}
		if !strings.Contains(logs.String(), "service="+svc) {
			t.Errorf("log does not name %s:\n%s", svc, logs.String())
		}
	}
	if strings.Contains(metrics, `service="default/good"`) {
		t.Errorf("good Service reported as a problem")
	}
	rulesKind := map[Mode]string{ModeIPTables: `kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}`,
		ModeIPVS: `nodekit_proxy_objects{kind="virtual_servers"}`, ModeNFTables: `nodekit_proxy_objects{kind="rules"}`}[mode]
	for _, m := range []string{`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1`,
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`,
		`kubeproxy_sync_proxy_rules_service_changes_total 4`, `kubeproxy_sync_proxy_rules_endpoint_changes_total 2`,
		`kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}`, rulesKind} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s:\n%s", m, metrics)
		}
	}
	if strings.Contains(metrics, "nodekit_proxy_sync") {
		t.Errorf("metrics still have nodekit_proxy_sync_* names")
	}
	// healthz and livez on their own port, with kube-proxy's body; not on the metrics port.
	for _, path := range []string{"/healthz", "/livez"} {
		code, body := get(t, "http://"+p.HealthzAddr()+path)
		var h struct {
			LastUpdated, CurrentTime time.Time
			Healthy                  bool
		}
		if err := json.Unmarshal([]byte(body), &h); code != http.StatusOK || err != nil || !h.Healthy ||
			h.CurrentTime.IsZero() || h.LastUpdated.Sub(h.CurrentTime).Abs() > time.Second {
			t.Errorf("%s = %d %s (%v); want 200 with lastUpdated = currentTime", path, code, body, err)
		}
		if code, _ := get(t, "http://"+p.Addr()+path); code != http.StatusNotFound {
			t.Errorf("metrics port answers %s with %d; want 404", path, code)
		}
	}
	// /debug/services lists what the last sync programmed.
	_, body := get(t, "http://"+p.Addr()+"/debug/services?service=default/good")
	var synced SyncedServices
	if err := json.Unmarshal([]byte(body), &synced); err != nil || synced.LastSync.IsZero() || len(synced.Ports) != 1 ||
		synced.Ports[0].ClusterIP != "10.96.0.5" || synced.Ports[0].Endpoints != 1 {
		t.Errorf("/debug/services?service=default/good = %s (%v); want one port, 10.96.0.5, 1 endpoint", body, err)
	}
}

// TestHealthzUnhealthyWhenChangesWait: a change that has waited longer than two sync periods makes /healthz
// and /livez answer 503 with the last sync time, as kube-proxy.
func TestHealthzUnhealthyWhenChangesWait(t *testing.T) {
	p, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", MinSyncPeriod: time.Millisecond, SyncPeriod: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	synced := time.Now().Add(-time.Minute)
	p.lastSync = synced
	p.changed(false, &v1.Service{})
	p.oldestPending = time.Now().Add(-time.Second) // waited 100 sync periods
	for _, path := range []string{"/healthz", "/livez"} {
		rec := httptest.NewRecorder()
		p.healthzMux().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var h proxyHealth
		if err := json.Unmarshal(rec.Body.Bytes(), &h); rec.Code != http.StatusServiceUnavailable || err != nil || h.Healthy ||
			!h.LastUpdated.Equal(synced) {
			t.Errorf("%s = %d %s; want 503 with lastUpdated %s", path, rec.Code, rec.Body, synced)
		}
	}
}

// TestBurstIsCoalesced: 40 Services created in a burst are applied in a handful of syncs, never more
// often than MinSyncPeriod.
func TestBurstIsCoalesced(t *testing.T) { eachMode(t, testBurstIsCoalesced) }

func testBurstIsCoalesced(t *testing.T, mode Mode) {
	node := testns.New(t)
	client := fake.NewClientset()
	p := start(t, Config{Client: client, Mode: mode, NodeName: "n1", NetNS: node, MinSyncPeriod: 500 * time.Millisecond, MetricsAddr: "127.0.0.1:0"})
	waitFor(t, "first sync", func() bool { return p.Applied() != nil })
	for i := 0; i < 40; i++ {
		if _, err := client.CoreV1().Services("default").Create(context.Background(),
			service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, v1.ProtocolTCP), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "40 services applied", func() bool { return len(p.Applied().Ports) == 40 })
	_, metrics := get(t, "http://"+p.Addr()+"/metrics")
	var count int
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} `) {
			fmt.Sscan(strings.Fields(l)[1], &count)
		}
	}
	t.Logf("40 creations applied in %d syncs (first sync included)", count)
	if count < 2 || count > 6 {
		t.Errorf("%d syncs for a burst of 40 events, want 2..6 (coalesced, MinSyncPeriod 500ms)", count)
	}
}

// TestIPVSModeNeedsKernelSupport: on a kernel without ip_vs, IPVS mode refuses to start and says why.
func TestIPVSModeNeedsKernelSupport(t *testing.T) {
	if ipvs.Available() == nil {
		t.Skip("kernel has ip_vs; the refusal path cannot be exercised here")
	}
	_, err := New(Config{Client: fake.NewClientset(), Mode: ModeIPVS, NodeName: "n1"})
	if err == nil || !strings.Contains(err.Error(), "ip_vs") || !strings.Contains(err.Error(), "--proxy-mode iptables") {
		t.Fatalf("New(ipvs) = %v, want an error naming ip_vs and the iptables alternative", err)
	}
}

func TestConfigErrors(t *testing.T) {
	c := fake.NewClientset()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Client is required"},
		{Config{Client: c, Mode: "userspace", NodeName: "n"}, `--proxy-mode "userspace"`},
		{Config{Client: c, ClusterCIDR: "10.0.0.0", NodeName: "n"}, `--cluster-cidr "10.0.0.0"`},
		{Config{Client: c, MinSyncPeriod: time.Minute, SyncPeriod: time.Second, NodeName: "n"}, "exceeds --sync-period"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestProgrammedServices: the status lists each Service of a sync with its and its slices'
// resourceVersions (headless slices were dropped before), and the problems that skipped its ports.
func TestProgrammedServices(t *testing.T) {
	svc := func(ns, name, rv string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
	}
	sl := func(ns, name, svc, rv string) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv,
			Labels: map[string]string{discovery.LabelServiceName: svc}}}
	}
	got := programmedServices([]*v1.Service{svc("b", "web", "7"), svc("a", "db", "3")},
		[]*discovery.EndpointSlice{sl("b", "web-1", "web", "8"), sl("b", "web-2", "web", "9"), sl("a", "orphan-1", "orphan", "4")},
		[]state.Problem{{Service: types.NamespacedName{Namespace: "a", Name: "db"}, Port: "x", Reason: "bad protocol"}})
	if len(got) != 2 || got[0].Name != "db" || got[0].ResourceVersion != "3" || len(got[0].EndpointSlices) != 0 ||
		len(got[0].Problems) != 1 || got[0].Problems[0] != "x: bad protocol" ||
		got[1].Name != "web" || got[1].EndpointSlices["web-1"] != "8" || got[1].EndpointSlices["web-2"] != "9" {
		t.Fatalf("programmedServices = %+v", got)
	}
}
