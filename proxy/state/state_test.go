package state

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func svc(name string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

type ep struct {
	ip, node                    string
	ready, serving, terminating *bool
}

func slice(svcName, name string, ports map[string]int32, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discovery.LabelServiceName: svcName}},
		AddressType: discovery.AddressTypeIPv4,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(n), Port: ptr.To(p), Protocol: ptr.To(v1.ProtocolTCP)})
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{e.ip}, NodeName: ptr.To(e.node),
			Conditions: discovery.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating},
		})
	}
	return s
}

func ips(eps []Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return strings.Join(out, ",")
}

var (
	yes = ptr.To(true)
	no  = ptr.To(false)
)

func TestComputeResolvesNamedPortsPerSlice(t *testing.T) {
	// Two slices: the endpoints of one listen on 8080, of the other on 9090 (a rolling update changing the
	// container port behind targetPort "web"); a duplicate address across slices is kept once.
	snap := Compute([]*v1.Service{svc("web", nil)}, []*discovery.EndpointSlice{
		slice("web", "web-1", map[string]int32{"http": 8080}, ep{ip: "10.244.1.2", node: "n1"}, ep{ip: "10.244.1.1", node: "n2"}),
		slice("web", "web-2", map[string]int32{"http": 9090}, ep{ip: "10.244.2.1", node: "n1"}),
		slice("web", "web-3", map[string]int32{"http": 8080}, ep{ip: "10.244.1.2", node: "n1"}),
		slice("other", "other-1", map[string]int32{"http": 1}, ep{ip: "10.9.9.9"}),
	}, Options{NodeName: "n1"})
	if len(snap.Ports) != 1 || len(snap.Problems) != 0 {
		t.Fatalf("ports=%d problems=%v", len(snap.Ports), snap.Problems)
	}
	sp := snap.Ports[0]
	if got, want := ips(sp.Endpoints), "10.244.1.1:8080,10.244.1.2:8080,10.244.2.1:9090"; got != want {
		t.Errorf("endpoints %s, want %s", got, want)
	}
	if got, want := ips(sp.LocalEndpoints()), "10.244.1.2:8080,10.244.2.1:9090"; got != want {
		t.Errorf("local endpoints %s, want %s", got, want)
	}
	if sp.Name.String() != "ns/web:http/TCP" || sp.ClusterIP.String() != "10.96.0.10" || sp.Port != 80 {
		t.Errorf("port = %+v", sp)
	}
}

func TestEndpointSelectionFollowsConditions(t *testing.T) {
	tests := []struct {
		name             string
		eps              []ep
		cluster, local   string
		internalLocal    bool
		internal, hasAny string
	}{
		{name: "nil conditions mean ready", eps: []ep{{ip: "10.0.0.1", node: "n1"}}, cluster: "10.0.0.1:80", local: "10.0.0.1:80"},
		{name: "not ready excluded", eps: []ep{{ip: "10.0.0.1", node: "n1", ready: no}, {ip: "10.0.0.2", node: "n2"}},
			cluster: "10.0.0.2:80", local: ""},
		{name: "terminating only when nothing is ready", eps: []ep{
			{ip: "10.0.0.1", node: "n1", ready: no, serving: yes, terminating: yes},
			{ip: "10.0.0.2", node: "n2", ready: yes}},
			cluster: "10.0.0.2:80", local: "10.0.0.1:80"},
		{name: "serving terminating as fallback", eps: []ep{
			{ip: "10.0.0.1", node: "n1", ready: no, serving: yes, terminating: yes},
			{ip: "10.0.0.2", node: "n2", ready: no, serving: no, terminating: yes}},
			cluster: "10.0.0.1:80", local: "10.0.0.1:80"},
		{name: "internal policy Local", internalLocal: true, eps: []ep{{ip: "10.0.0.1", node: "n2"}, {ip: "10.0.0.2", node: "n1"}},
			cluster: "10.0.0.1:80,10.0.0.2:80", local: "10.0.0.2:80", internal: "10.0.0.2:80"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("s", func(s *v1.Service) {
				if tc.internalLocal {
					s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
				}
			})
			snap := Compute([]*v1.Service{s}, []*discovery.EndpointSlice{slice("s", "s-1", map[string]int32{"http": 80}, tc.eps...)}, Options{NodeName: "n1"})
			sp := snap.Ports[0]
			if got := ips(sp.ClusterEndpoints()); got != tc.cluster {
				t.Errorf("cluster endpoints %q, want %q", got, tc.cluster)
			}
			if got := ips(sp.LocalEndpoints()); got != tc.local {
				t.Errorf("local endpoints %q, want %q", got, tc.local)
			}
			want := tc.internal
			if want == "" {
				want = tc.cluster
			}
			if got := ips(sp.InternalEndpoints()); got != want {
				t.Errorf("internal endpoints %q, want %q", got, want)
			}
		})
	}
}

func TestComputeServiceKinds(t *testing.T) {
	services := []*v1.Service{
		svc("headless", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
		svc("external-name", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.ClusterIP = "" }),
		svc("np", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.ExternalIPs = []string{"192.0.2.1", "not-an-ip"}
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}),
		svc("affinity", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}),
		// ClusterIP type ignores a stray nodePort and Local external policy.
		svc("plain", func(s *v1.Service) {
			s.Spec.Ports[0].NodePort = 30099
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}),
	}
	snap := Compute(services, nil, Options{})
	byName := map[string]*ServicePort{}
	for _, sp := range snap.Ports {
		byName[sp.Name.Name] = sp
	}
	if len(snap.Ports) != 3 || byName["headless"] != nil || byName["external-name"] != nil {
		t.Fatalf("ports: %v", byName)
	}
	np := byName["np"]
	if np.NodePort != 30080 || !np.ExternalLocal || len(np.ExternalIPs) != 1 || np.AffinityTimeout != v1.DefaultClientIPServiceAffinitySeconds || !np.HasExternal() {
		t.Errorf("np = %+v", np)
	}
	if a := byName["affinity"]; a.AffinityTimeout != 60 {
		t.Errorf("affinity timeout = %d", a.AffinityTimeout)
	}
	if p := byName["plain"]; p.NodePort != 0 || p.ExternalLocal || p.HasExternal() {
		t.Errorf("plain = %+v", p)
	}
	if len(snap.Problems) != 1 || !strings.Contains(snap.Problems[0].String(), `ns/np: spec.externalIPs: "not-an-ip"`) {
		t.Errorf("problems = %v", snap.Problems)
	}
}

func TestBadServicesAreReportedAndSkipped(t *testing.T) {
	services := []*v1.Service{
		svc("port-zero", func(s *v1.Service) { s.Spec.Ports[0].Port = 0 }),
		svc("bad-proto", func(s *v1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }),
		svc("bad-ip", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.0.300" }),
		svc("unresolved", func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("nope") }),
		svc("mixed", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "bad", Port: 70000, Protocol: v1.ProtocolTCP})
		}),
		svc("good", nil),
		// No pod selected yet: the controller's placeholder slice has neither endpoints nor ports.
		svc("waiting", func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }),
	}
	slices := []*discovery.EndpointSlice{
		slice("waiting", "w-1", nil),
		slice("unresolved", "u-1", map[string]int32{"other": 8080}, ep{ip: "10.0.0.1"}),
		slice("good", "g-1", map[string]int32{"http": 8080}, ep{ip: "10.0.0.2"}),
		slice("mixed", "m-1", map[string]int32{"http": 8080}, ep{ip: "10.0.0.3"}),
	}
	snap := Compute(services, slices, Options{})
	var names []string
	for _, sp := range snap.Ports {
		names = append(names, sp.Name.Name+"="+ips(sp.Endpoints))
	}
	if got, want := strings.Join(names, " "), "good=10.0.0.2:8080 mixed=10.0.0.3:8080 unresolved= waiting="; got != want {
		t.Errorf("ports %q, want %q", got, want)
	}
	var probs []string
	for _, p := range snap.Problems {
		probs = append(probs, p.String())
	}
	all := strings.Join(probs, "\n")
	for _, want := range []string{
		`ns/bad-ip: spec.clusterIP "10.96.0.300" is not an IPv4 address`,
		`ns/bad-proto:http: spec.ports[0].protocol "ICMP" is not TCP, UDP or SCTP`,
		`ns/mixed:bad: spec.ports[1].port 70000 is outside 1-65535`,
		`ns/port-zero:http: spec.ports[0].port 0 is outside 1-65535`,
		`ns/unresolved:http: no EndpointSlice has a port named "http"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if len(probs) != 5 {
		t.Errorf("%d problems, want 5:\n%s", len(probs), all)
	}
}

func TestIgnoresForeignSlices(t *testing.T) {
	s6 := slice("web", "v6", map[string]int32{"http": 80}, ep{ip: "fd00::1"})
	s6.AddressType = discovery.AddressTypeIPv6
	unlabeled := slice("web", "x", map[string]int32{"http": 80}, ep{ip: "10.0.0.9"})
	unlabeled.Labels = nil
	otherNS := slice("web", "y", map[string]int32{"http": 80}, ep{ip: "10.0.0.8"})
	otherNS.Namespace = "elsewhere"
	snap := Compute([]*v1.Service{svc("web", nil)}, []*discovery.EndpointSlice{s6, unlabeled, otherNS}, Options{})
	if len(snap.Ports[0].Endpoints) != 0 || snap.Ports[0].HasEndpoints() {
		t.Errorf("endpoints from foreign slices: %v", snap.Ports[0].Endpoints)
	}
}

// TestCacheReusesUnchangedServices: a Cache returns the very ServicePorts of Services whose objects did not
// change, recomputes a Service whose EndpointSlice was replaced, and drops a deleted Service.
func TestCacheReusesUnchangedServices(t *testing.T) {
	mk := func(name, ip string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
	}
	sl := func(svc, addr string) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-x", Labels: map[string]string{discovery.LabelServiceName: svc}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
			Endpoints:   []discovery.Endpoint{{Addresses: []string{addr}}},
		}
	}
	a, b := mk("a", "10.96.0.1"), mk("b", "10.96.0.2")
	sa, sb := sl("a", "10.0.0.1"), sl("b", "10.0.0.2")
	var c Cache
	opts := Options{NodeName: "n"}
	first := c.Compute([]*v1.Service{a, b}, []*discovery.EndpointSlice{sa, sb}, opts)
	if first.Recomputed != 2 || len(first.Ports) != 2 {
		t.Fatalf("first Compute: %d recomputed, %d ports; want 2, 2", first.Recomputed, len(first.Ports))
	}
	sb2 := sl("b", "10.0.0.3")
	second := c.Compute([]*v1.Service{b, a}, []*discovery.EndpointSlice{sb2, sa}, opts)
	if second.Recomputed != 1 {
		t.Fatalf("second Compute recomputed %d Services; want 1 (b, whose slice changed)", second.Recomputed)
	}
	if second.Ports[0] != first.Ports[0] {
		t.Error("unchanged Service a got a new ServicePort")
	}
	if second.Ports[1] == first.Ports[1] || second.Ports[1].Endpoints[0].IP.String() != "10.0.0.3" {
		t.Errorf("changed Service b: %+v; want a new ServicePort with endpoint 10.0.0.3", second.Ports[1])
	}
	if full := Compute([]*v1.Service{b, a}, []*discovery.EndpointSlice{sb2, sa}, opts); !reflect.DeepEqual(full.Ports, second.Ports) {
		t.Errorf("cached Compute differs from a fresh one:\n%+v\n%+v", second.Ports, full.Ports)
	}
	third := c.Compute([]*v1.Service{a}, []*discovery.EndpointSlice{sa, sb2}, opts)
	if third.Recomputed != 0 || len(third.Ports) != 1 || third.Ports[0] != first.Ports[0] {
		t.Errorf("after deleting b: %d recomputed, ports %+v; want 0 and a's port", third.Recomputed, third.Ports)
	}
}
