package endpointslicemirroring

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDesiredSlices: subsets are grouped by family and ports (two subsets with one port set share a
// slice, an IP once, a ready entry winning), invalid IPs are skipped and counted, IPv4-mapped IPv6
// addresses are written as IPv4, and skip-mirror / leader-election Endpoints are not mirrored.
func TestDesiredSlices(t *testing.T) {
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns", UID: "u1", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{v1.LastAppliedConfigAnnotation: "{}", "keep": "1"}},
		Subsets: []v1.EndpointSubset{
			{Ports: []v1.EndpointPort{{Name: "b", Port: 81, Protocol: v1.ProtocolTCP}, {Name: "a", Port: 80, Protocol: v1.ProtocolTCP}},
				Addresses: []v1.EndpointAddress{{IP: "10.0.0.2"}, {IP: "fd00::1"}, {IP: "not-an-ip"}}},
			{Ports: []v1.EndpointPort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "b", Port: 81, Protocol: v1.ProtocolTCP}},
				NotReadyAddresses: []v1.EndpointAddress{{IP: "10.0.0.2"}, {IP: "::ffff:10.0.0.3", Hostname: "h"}}},
		},
	}
	got, skipped := desiredSlices(ep)
	if skipped != 1 {
		t.Errorf("skipped %d, want 1 (not-an-ip)", skipped)
	}
	var summary []string
	for _, s := range got {
		line := fmt.Sprintf("%s %s:%d,%s:%d", s.AddressType, *s.Ports[0].Name, *s.Ports[0].Port, *s.Ports[1].Name, *s.Ports[1].Port)
		for _, e := range s.Endpoints {
			h := ""
			if e.Hostname != nil {
				h = *e.Hostname
			}
			line += fmt.Sprintf(" %s/%v/%s", e.Addresses[0], *e.Conditions.Ready, h)
		}
		summary = append(summary, line)
		if s.Labels[discoveryv1.LabelServiceName] != "ext" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels["a"] != "b" {
			t.Errorf("labels %v", s.Labels)
		}
		if _, ok := s.Annotations[v1.LastAppliedConfigAnnotation]; ok || s.Annotations["keep"] != "1" {
			t.Errorf("annotations %v", s.Annotations)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "Endpoints" || ref.UID != "u1" || s.GenerateName != "ext-" {
			t.Errorf("owner %+v, generateName %q", s.OwnerReferences, s.GenerateName)
		}
	}
	want := "[IPv4 a:80,b:81 10.0.0.2/true/ 10.0.0.3/false/h IPv6 a:80,b:81 fd00::1/true/]"
	if fmt.Sprint(summary) != want {
		t.Errorf("slices %v\nwant %s", summary, want)
	}

	for _, mut := range []func(*v1.Endpoints){
		func(e *v1.Endpoints) { e.Labels[discoveryv1.LabelSkipMirror] = "true" },
		func(e *v1.Endpoints) { e.Annotations["control-plane.alpha.kubernetes.io/leader"] = "{}" },
	} {
		e := ep.DeepCopy()
		mut(e)
		if shouldMirror(e) {
			t.Errorf("mirrored: labels %v annotations %v", e.Labels, e.Annotations)
		}
	}
	if !shouldMirror(ep) {
		t.Error("plain Endpoints not mirrored")
	}
}
