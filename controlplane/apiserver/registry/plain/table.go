package plain

import (
	"fmt"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// maxListed is how many ports or addresses a cell lists before "+ N more...", as kubectl does.
const maxListed = 3

// endpointSliceTable renders kubectl's endpoint slice table: NAME ADDRESSTYPE PORTS ENDPOINTS AGE.
var endpointSliceTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("AddressType", "IPv4, IPv6 or FQDN"),
		store.Column("Ports", "the slice's port numbers"),
		store.Column("Endpoints", "the endpoints' addresses"),
	},
	Cells: func(o runtime.Object) []any {
		s := o.(*discoveryv1.EndpointSlice)
		return []any{string(s.AddressType), slicePorts(s.Ports), sliceAddresses(s.Endpoints)}
	},
}

// slicePorts is the PORTS cell: each port's number (its name when the number is unset, "*" when both are),
// comma-separated.
func slicePorts(ports []discoveryv1.EndpointPort) string {
	var list []string
	for _, p := range ports {
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return listCell(list)
}

// sliceAddresses is the ENDPOINTS cell: every endpoint's addresses, comma-separated.
func sliceAddresses(endpoints []discoveryv1.Endpoint) string {
	var list []string
	for _, e := range endpoints {
		list = append(list, e.Addresses...)
	}
	return listCell(list)
}

// listCell joins the first maxListed items with commas and adds " + N more..." for the rest; "<unset>"
// when there are none.
func listCell(list []string) string {
	switch {
	case len(list) == 0:
		return "<unset>"
	case len(list) > maxListed:
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:maxListed], ","), len(list)-maxListed)
	default:
		return strings.Join(list, ",")
	}
}
