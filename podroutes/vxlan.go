package podroutes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/cni/vxlan"
)

// The Node annotations a vxlan node publishes its VTEP in, flannel's (its kube subnet manager's), so that
// what reads flannel's reads nodekit's: the backend type, its data {"VNI":1,"VtepMAC":"0e:6b:…"} and the
// public IP the other nodes' tunnels go to.
const (
	AnnotationBackendType = "flannel.alpha.coreos.com/backend-type"
	AnnotationBackendData = "flannel.alpha.coreos.com/backend-data"
	AnnotationPublicIP    = "flannel.alpha.coreos.com/public-ip"
)

// ReasonVXLANPeer is the reason of the Warning event on a Node the vxlan backend will not tunnel to
// (it runs another backend, another VNI, or publishes unreadable data).
const ReasonVXLANPeer = "VXLANPeerUnusable"

// BackendData is the value of AnnotationBackendData for vxlan, flannel's vxlanLeaseAttrs.
type BackendData struct {
	VNI     int    `json:"VNI"`
	VtepMAC string `json:"VtepMAC"`
}

// tunnel is what the vxlan backend does to the kernel (cni/vxlan and cni/routes; a fake in unit tests).
type tunnel interface {
	Ensure(d vxlan.Device) (index int, err error)
	SetAddress(index int, ip net.IP) error
	SyncPeers(index int, peers []vxlan.Peer) (added, removed int, err error)
	SyncRoutes(desired []routes.Route, scope *net.IPNet) (added, removed int, err error)
}

// kernelTunnel is tunnel on the calling thread's network namespace.
type kernelTunnel struct{}

func (kernelTunnel) Ensure(d vxlan.Device) (int, error)                { return vxlan.Ensure(d) }
func (kernelTunnel) SetAddress(index int, ip net.IP) error             { return vxlan.SetAddress(index, ip) }
func (kernelTunnel) SyncPeers(i int, p []vxlan.Peer) (int, int, error) { return vxlan.SyncPeers(i, p) }
func (kernelTunnel) SyncRoutes(d []routes.Route, s *net.IPNet) (int, int, error) {
	return routes.Sync(d, s)
}

// vxlanBackend keeps this node's VTEP (the device nodekit.<VNI>, its address the first of this node's
// podCIDR) and, per peer that publishes a VTEP of the same VNI, a neighbour entry (its VTEP address → its
// VTEP MAC), a forwarding entry (the MAC → its public IP, else its InternalIP) and the route "<its podCIDR>
// via <its VTEP address> dev nodekit.<VNI> onlink".
type vxlanBackend struct {
	dev    vxlan.Device
	self   string
	scope  *net.IPNet
	client kubernetes.Interface
	k      tunnel
	log    *slog.Logger
	// waiting are the peers without a VTEP yet (logged once each).
	waiting map[string]bool
}

func newVXLAN(cfg Config, log *slog.Logger, k tunnel) (*vxlanBackend, error) {
	if cfg.NodeName == "" {
		return nil, fmt.Errorf("podroutes: the vxlan backend needs NodeName (the Node its VTEP is published on)")
	}
	dev := vxlan.Device{VNI: cfg.VNI, Port: cfg.Port, LocalIP: cfg.NodeIP.To4()}
	if dev.VNI == 0 {
		dev.VNI = vxlan.DefaultVNI
	}
	if dev.Port == 0 {
		dev.Port = vxlan.DefaultPort
	}
	if err := dev.Validate(); err != nil {
		return nil, fmt.Errorf("podroutes: %w", err)
	}
	return &vxlanBackend{dev: dev, self: cfg.NodeName, scope: cfg.ClusterCIDR, client: cfg.Client, k: k, log: log,
		waiting: map[string]bool{}}, nil
}

func (v *vxlanBackend) reason() string { return ReasonVXLANPeer }

// annotations are the VTEP annotations this node publishes.
func (v *vxlanBackend) annotations() map[string]string {
	data, _ := json.Marshal(BackendData{VNI: v.dev.VNI, VtepMAC: vxlan.MAC(v.dev.LocalIP).String()})
	return map[string]string{AnnotationBackendType: BackendVXLAN, AnnotationBackendData: string(data),
		AnnotationPublicIP: v.dev.LocalIP.String()}
}

func (v *vxlanBackend) sync(self *corev1.Node, peers []routes.Route, nodes map[string]*corev1.Node) (map[string]string, error) {
	index, err := v.k.Ensure(v.dev)
	if err != nil {
		return nil, err
	}
	if own := ownPodCIDR(self, v.scope); own != nil {
		if err := v.k.SetAddress(index, vxlan.VTEPAddress(own)); err != nil {
			return nil, err
		}
	}
	var want []routes.Route
	var tunnels []vxlan.Peer
	refused := map[string]string{}
	waiting := map[string]bool{}
	for _, r := range peers {
		p, why := v.peer(r, nodes[r.Node])
		switch {
		case why != "":
			refused[r.Node] = why
			continue
		case p == nil:
			waiting[r.Node] = true
			continue
		}
		tunnels = append(tunnels, *p)
		want = append(want, routes.Route{PodCIDR: r.PodCIDR, Gw: p.VTEP, Node: r.Node, LinkIndex: index, OnLink: true})
	}
	for name := range waiting {
		if !v.waiting[name] {
			v.log.Info("peer has not published a VTEP yet; no tunnel to it", "peer", name, "annotation", AnnotationBackendData)
		}
	}
	v.waiting = waiting
	// The entries first, so that a new route never points at a VTEP the kernel cannot resolve.
	addE, rmE, err := v.k.SyncPeers(index, tunnels)
	if err != nil {
		return refused, err
	}
	addR, rmR, err := v.k.SyncRoutes(want, v.scope)
	if addE+rmE+addR+rmR > 0 {
		v.log.Info("vxlan peers synced", "device", vxlan.DeviceName(v.dev.VNI), "peers", len(tunnels),
			"routesAdded", addR, "routesRemoved", rmR, "entriesAdded", addE, "entriesRemoved", rmE)
	}
	return refused, err
}

// peer is the tunnel to r's node n, nil without a published VTEP yet (no backend-type annotation), or
// why n cannot be tunnelled to.
func (v *vxlanBackend) peer(r routes.Route, n *corev1.Node) (*vxlan.Peer, string) {
	if n == nil {
		return nil, ""
	}
	typ, ok := n.Annotations[AnnotationBackendType]
	if !ok {
		return nil, ""
	}
	if typ != BackendVXLAN {
		return nil, fmt.Sprintf("annotation %s is %q: the node runs another backend than this node's vxlan", AnnotationBackendType, typ)
	}
	var data BackendData
	if err := json.Unmarshal([]byte(n.Annotations[AnnotationBackendData]), &data); err != nil {
		return nil, fmt.Sprintf("annotation %s: %v", AnnotationBackendData, err)
	}
	if data.VNI != v.dev.VNI {
		return nil, fmt.Sprintf("annotation %s: VNI %d, this node's is %d", AnnotationBackendData, data.VNI, v.dev.VNI)
	}
	mac, err := net.ParseMAC(data.VtepMAC)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Sprintf("annotation %s: VtepMAC %q is not an Ethernet MAC address", AnnotationBackendData, data.VtepMAC)
	}
	dst := r.Gw
	if s, ok := n.Annotations[AnnotationPublicIP]; ok {
		if dst = net.ParseIP(s).To4(); dst == nil {
			return nil, fmt.Sprintf("annotation %s: %q is not an IPv4 address", AnnotationPublicIP, s)
		}
	}
	return &vxlan.Peer{Node: n.Name, VTEP: vxlan.VTEPAddress(r.PodCIDR), MAC: mac, NodeIP: dst}, ""
}

// publish writes this node's VTEP annotations on its Node when they differ (a merge patch of the
// annotations only); without the Node (not registered yet) it waits for the next sync.
func (v *vxlanBackend) publish(ctx context.Context, self *corev1.Node) error {
	if self == nil {
		return nil
	}
	want := v.annotations()
	same := true
	for k, val := range want {
		same = same && self.Annotations[k] == val
	}
	if same {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if _, err := v.client.CoreV1().Nodes().Patch(ctx, v.self, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("podroutes: publish the VTEP on Node %s: %w", v.self, err)
	}
	v.log.Info("VTEP published", "device", vxlan.DeviceName(v.dev.VNI), "mac", vxlan.MAC(v.dev.LocalIP), "publicIP", v.dev.LocalIP)
	return nil
}

// ownPodCIDR is the node's first IPv4 podCIDR inside scope, nil if none (not assigned yet).
func ownPodCIDR(n *corev1.Node, scope *net.IPNet) *net.IPNet {
	if n == nil {
		return nil
	}
	for _, c := range routes.PodCIDRs(n) {
		if routes.Within(c, scope) {
			return c
		}
	}
	return nil
}
