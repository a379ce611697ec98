package endpointslice

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testPod(name, ip string, ready, terminating bool, ports ...v1.ContainerPort) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + "name"},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Ports: ports}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}},
	}
	if ready {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	}
	if terminating {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestGroupEndpointsResolvesNamedPortsAndConditions(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9100)},
		}},
	}
	pods := []*v1.Pod{
		testPod("a", "10.244.0.2", true, false, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		testPod("b", "10.244.0.3", false, false, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		testPod("c", "10.244.1.2", true, true, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		testPod("d", "10.244.1.3", true, false, v1.ContainerPort{Name: "http", ContainerPort: 8081}), // other port → own slice
		testPod("e", "", true, false), // no IP yet
		testPod("f", "fd00::5", true, false, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
	}
	groups := groupEndpoints(svc, pods)
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3 (IPv4:8080, IPv4:8081, IPv6:8080)", len(groups))
	}
	byIP := map[string]endpoint{}
	portsOf := map[string][]discoveryv1.EndpointPort{}
	for _, g := range groups {
		for _, e := range g.endpoints {
			byIP[e.ip] = e
			portsOf[e.ip] = g.ports
			if want := discoveryv1.AddressTypeIPv4; e.ip == "fd00::5" {
				if g.addressType != discoveryv1.AddressTypeIPv6 {
					t.Fatalf("IPv6 endpoint in %s slice", g.addressType)
				}
			} else if g.addressType != want {
				t.Fatalf("IPv4 endpoint in %s slice", g.addressType)
			}
		}
	}
	if len(byIP) != 5 {
		t.Fatalf("endpoints %v, want 5 (pod without IP left out)", byIP)
	}
	check := func(ip string, ready, serving, terminating bool) {
		t.Helper()
		e := byIP[ip]
		if e.ready != ready || e.serving != serving || e.terminating != terminating {
			t.Fatalf("%s conditions ready=%v serving=%v terminating=%v", ip, e.ready, e.serving, e.terminating)
		}
	}
	check("10.244.0.2", true, true, false)
	check("10.244.0.3", false, false, false)
	check("10.244.1.2", false, true, true)
	if p := portsOf["10.244.0.2"]; len(p) != 2 || *p[0].Port != 8080 || *p[0].Name != "http" || *p[1].Port != 9100 {
		t.Fatalf("ports for a = %+v", p)
	}
	if p := portsOf["10.244.1.3"]; *p[0].Port != 8081 {
		t.Fatalf("ports for d = %+v", p)
	}

	slices := desiredSlices(svc, groups)
	for _, s := range slices {
		if s.Labels[discoveryv1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
			t.Fatalf("slice labels %v", s.Labels)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "Service" || ref.Name != "web" {
			t.Fatalf("slice owner %+v", s.OwnerReferences)
		}
	}

	// A pod lacking the named port gets no port for it.
	if got := resolvePorts(svc, testPod("x", "10.0.0.9", true, false)); len(got) != 1 || *got[0].Port != 9100 {
		t.Fatalf("ports for a pod without the named port = %+v", got)
	}
}

func TestDesiredSlicesSplitAtMax(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}}}
	var pods []*v1.Pod
	for i := range 250 {
		pods = append(pods, testPod("p", "10.1."+itoa(i/200)+"."+itoa(i%200+1), true, false))
	}
	slices := desiredSlices(svc, groupEndpoints(svc, pods))
	if len(slices) != 3 || len(slices[0].Endpoints) != 100 || len(slices[2].Endpoints) != 50 {
		t.Fatalf("got %d slices", len(slices))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
