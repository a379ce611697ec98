package server

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestKubernetesSlice: the `kubernetes` EndpointSlice carries the service-name label and no managed-by
// (the EndpointSlice controller must not adopt it), the advertised address's family, one ready endpoint
// and the https port; a non-IP advertise address is refused.
func TestKubernetesSlice(t *testing.T) {
	for _, c := range []struct {
		advertise, addr string
		family          discoveryv1.AddressType
	}{{"192.168.1.10", "192.168.1.10", discoveryv1.AddressTypeIPv4}, {"::ffff:10.0.0.1", "10.0.0.1", discoveryv1.AddressTypeIPv4},
		{"fd00::1", "fd00::1", discoveryv1.AddressTypeIPv6}} {
		s, err := kubernetesSlice(c.advertise, 6443)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != "kubernetes" || s.Namespace != "default" || s.Labels[discoveryv1.LabelServiceName] != "kubernetes" || s.Labels[discoveryv1.LabelManagedBy] != "" {
			t.Fatalf("%s: meta %+v", c.advertise, s.ObjectMeta)
		}
		if s.AddressType != c.family || len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != c.addr ||
			s.Endpoints[0].Conditions.Ready == nil || !*s.Endpoints[0].Conditions.Ready {
			t.Fatalf("%s: endpoints %s %+v", c.advertise, s.AddressType, s.Endpoints)
		}
		if len(s.Ports) != 1 || *s.Ports[0].Name != "https" || *s.Ports[0].Port != 6443 || *s.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Fatalf("%s: ports %+v", c.advertise, s.Ports)
		}
	}
	if _, err := kubernetesSlice("apiserver.local", 6443); err == nil || !strings.Contains(err.Error(), "not an IP") {
		t.Fatalf("host name: err = %v", err)
	}
}
