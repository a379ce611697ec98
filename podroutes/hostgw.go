package podroutes

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cni/routes"
)

// ReasonUnreachable is the reason of the Warning event on a Node the host-gw backend will not route to.
const ReasonUnreachable = "HostGatewayUnreachable"

// hostGW is the host-gw backend: a route per peer via its InternalIP, which must be on a directly
// connected network of this node (one L2 segment).
type hostGW struct {
	scope *net.IPNet
	log   *slog.Logger
}

func (h hostGW) sync(_ *corev1.Node, peers []routes.Route, _ map[string]*corev1.Node) (map[string]string, error) {
	var want []routes.Route
	refused := map[string]string{}
	for _, r := range peers {
		if ok, err := routes.Connected(r.Gw); err != nil {
			refused[r.Node] = err.Error()
			continue
		} else if !ok {
			refused[r.Node] = fmt.Sprintf("InternalIP %s is not on a directly connected network of this node: host-gw needs one L2 segment (no route to %s via a gateway)", r.Gw, r.PodCIDR)
			continue
		}
		want = append(want, r)
	}
	added, removed, err := routes.Sync(want, h.scope)
	if added > 0 || removed > 0 {
		h.log.Info("host-gw routes synced", "routes", len(want), "added", added, "removed", removed)
	}
	return refused, err
}

// publish: host-gw tells the other nodes nothing beyond the Node's podCIDR and InternalIP.
func (hostGW) publish(context.Context, *corev1.Node) error { return nil }

func (hostGW) reason() string { return ReasonUnreachable }
