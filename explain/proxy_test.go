package explain

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/proxystatus"
)

// TestProxyVerdict: a Service with a ready endpoint is programmed when every Ready node's proxy reports
// its current resourceVersions; a node behind, failing, silent or disabled is named or marked unchecked.
func TestProxyVerdict(t *testing.T) {
	yes := true
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "20", CreationTimestamp: at(0)},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"}}}
	slice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", ResourceVersion: "31", CreationTimestamp: at(1),
		ManagedFields: []metav1.ManagedFieldsEntry{{Time: ptr.To(at(30))}}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}}}
	pod := basePod(v1.ContainerState{Running: &v1.ContainerStateRunning{}})
	setReady(pod)
	status := func(sliceRV string) *proxystatus.Status {
		return &proxystatus.Status{Node: "n1", Mode: "iptables", LastSync: t0.Add(11 * time.Second), Services: []proxystatus.Service{
			{Namespace: "default", Name: "web", ResourceVersion: "20", EndpointSlices: map[string]string{"web-abc": sliceRV}}}}
	}
	facts := func(nps ...NodeProxy) ServiceFacts {
		return ServiceFacts{Service: svc, Pods: []v1.Pod{*pod}, Slices: []discoveryv1.EndpointSlice{slice}, Proxies: nps, Now: t0}
	}

	f := facts(NodeProxy{Node: "n1", Ready: true, Status: status("31")}, NodeProxy{Node: "n2", Ready: true, Status: status("32")})
	if v := ServiceVerdict(f); v.Stuck || v.Step != "Ready" {
		t.Fatalf("programmed everywhere (n2 already newer): %+v", v)
	}
	if st := proxySteps(f); len(st) != 2 || !st[0].OK || !strings.HasPrefix(st[0].Detail, "programmed default/web (resourceVersion 20, 1 slices; iptables mode, last sync ") {
		t.Errorf("programmed steps: %+v", st)
	}

	// n1 synced at 10:00:11, before the slice changed (10:00:30): it programmed resourceVersion 25 only.
	f = facts(NodeProxy{Node: "n1", Ready: true, Status: status("25")})
	v := ServiceVerdict(f)
	want := "node n1's proxy has not programmed Service default/web: slice web-abc at resourceVersion 31, only 25 (slice changed " +
		clock(at(30).Time) + ") (last sync " + clock(t0.Add(11*time.Second)) + ")"
	if !v.Stuck || v.Step != "ProxyNotProgrammed" || v.Message != want || !strings.Contains(v.Fix, "node n1") {
		t.Fatalf("lagging proxy:\n got %+v\nwant %q", v, want)
	}
	if st := proxySteps(f); len(st) != 1 || st[0].OK || !strings.HasPrefix(st[0].Detail, "has not programmed Service default/web: slice web-abc") {
		t.Errorf("lagging step: %+v", st)
	}

	// A failing sync is reported with its error; a Service the proxy never saw; a NotReady node is left to
	// explain node.
	failing := status("25")
	failing.LastError, failing.LastErrorTime = "iptables-restore: exit status 4", t0.Add(40*time.Second)
	if v := ServiceVerdict(facts(NodeProxy{Node: "n1", Ready: true, Status: failing})); !strings.HasSuffix(v.Message, "its last sync failed at "+clock(t0.Add(40*time.Second))+": iptables-restore: exit status 4") {
		t.Errorf("failing sync: %+v", v)
	}
	empty := &proxystatus.Status{Node: "n1", LastSync: t0}
	if v := ServiceVerdict(facts(NodeProxy{Node: "n1", Ready: true, Status: empty})); !v.Stuck || !strings.HasPrefix(v.Message, "node n1's proxy has not programmed Service default/web (last sync ") {
		t.Errorf("service unknown to the proxy: %+v", v)
	}
	if v := ServiceVerdict(facts(NodeProxy{Node: "n1", Ready: false, Status: empty})); v.Stuck {
		t.Errorf("NotReady node's proxy decided the verdict: %+v", v)
	}

	// Nothing to compare with: disabled, an upstream kubelet (404), unreachable.
	f = facts(NodeProxy{Node: "n1", Ready: true, Status: &proxystatus.Status{Node: "n1", Disabled: true}},
		NodeProxy{Node: "n2", Ready: true, NotServed: true}, NodeProxy{Node: "n3", Ready: true, Err: "dial tcp: connection refused"})
	if v := ServiceVerdict(f); v.Stuck {
		t.Errorf("unchecked nodes made it stuck: %+v", v)
	}
	st := proxySteps(f)
	if len(st) != 3 || !strings.Contains(st[0].Detail, "--disable-proxy") || !strings.Contains(st[1].Detail, "not a nodekit agent") ||
		st[2].OK || !strings.Contains(st[2].Detail, "unreachable: dial tcp") {
		t.Errorf("unchecked steps: %+v", st)
	}

	if behind("100", "99") || !behind("99", "100") || behind("7", "7") || !behind("abc", "7") {
		t.Errorf("behind() compares resourceVersions wrongly")
	}
}
