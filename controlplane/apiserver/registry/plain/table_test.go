package plain

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store/storetest"
)

// TestEndpointSliceTable: NAME ADDRESSTYPE PORTS ENDPOINTS AGE, ports by number (name, "*" when unset),
// at most three addresses then "+ N more...", "<unset>" when empty.
func TestEndpointSliceTable(t *testing.T) {
	port, name, proto := int32(8080), "metrics", corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-x7k2p", Namespace: "default", CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * time.Hour))},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}, {Addresses: []string{"10.244.0.6"}},
			{Addresses: []string{"10.244.1.2"}}, {Addresses: []string{"10.244.1.3"}}, {Addresses: []string{"10.244.2.9"}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}, {Name: &name}, {}},
	}
	columns, wide, cells := storetest.Row(t, endpointSliceTable, s)
	if columns != "Name|AddressType|Ports|Endpoints|Age" || wide != "" {
		t.Fatalf("columns %s, wide %s", columns, wide)
	}
	want := []any{"web-x7k2p", "IPv4", "8080,metrics,*", "10.244.0.5,10.244.0.6,10.244.1.2 + 2 more...", "120m"}
	if !reflect.DeepEqual(cells, want) {
		t.Fatalf("cells %#v, want %#v", cells, want)
	}
	empty := endpointSliceTable.Cells(&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6})
	if !reflect.DeepEqual(empty, []any{"IPv6", "<unset>", "<unset>"}) {
		t.Fatalf("empty slice cells %#v", empty)
	}
}
