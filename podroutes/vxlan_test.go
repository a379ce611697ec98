package podroutes

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/cni/vxlan"
)

// fakeTunnel is the kernel's state as the vxlan backend left it.
type fakeTunnel struct {
	dev     *vxlan.Device
	addr    string
	peers   []string // vxlan.Peer.String()
	routes  []string // routes.Route.String()
	ensured int
}

const fakeIndex = 7

func (f *fakeTunnel) Ensure(d vxlan.Device) (int, error) {
	f.dev = &d
	f.ensured++
	return fakeIndex, nil
}
func (f *fakeTunnel) SetAddress(i int, ip net.IP) error {
	if i != fakeIndex {
		return fmt.Errorf("device #%d", i)
	}
	f.addr = ip.String()
	return nil
}
func (f *fakeTunnel) SyncPeers(i int, ps []vxlan.Peer) (int, int, error) {
	f.peers = nil
	for _, p := range ps {
		f.peers = append(f.peers, p.String())
	}
	sort.Strings(f.peers)
	return len(ps), 0, nil
}
func (f *fakeTunnel) SyncRoutes(rs []routes.Route, scope *net.IPNet) (int, int, error) {
	f.routes = nil
	for _, r := range rs {
		if !routes.Within(r.PodCIDR, scope) {
			return 0, 0, fmt.Errorf("route %s outside %s", r, scope)
		}
		f.routes = append(f.routes, r.String())
	}
	sort.Strings(f.routes)
	return len(rs), 0, nil
}

func vxNode(name, podCIDR, ip string, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec:   corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

func vtep(vni int, mac, publicIP string) map[string]string {
	a := map[string]string{AnnotationBackendType: "vxlan", AnnotationBackendData: fmt.Sprintf(`{"VNI":%d,"VtepMAC":%q}`, vni, mac)}
	if publicIP != "" {
		a[AnnotationPublicIP] = publicIP
	}
	return a
}

// newFakeVXLAN is a controller of node "me" (192.168.5.1) on the vxlan backend over a fake kernel.
func newFakeVXLAN(t *testing.T, objs ...*corev1.Node) (*Controller, *fakeTunnel, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset()
	for _, o := range objs {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, cidr, _ := net.ParseCIDR("10.177.0.0/16")
	rec := record.NewFakeRecorder(20)
	c, err := New(Config{Client: client, NodeName: "me", ClusterCIDR: cidr, Backend: BackendVXLAN, NodeIP: net.ParseIP("192.168.5.1"),
		Recorder: rec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeTunnel{}
	c.backend.(*vxlanBackend).k = k
	return c, k, client, rec
}

func TestVXLANConfig(t *testing.T) {
	_, cidr, _ := net.ParseCIDR("10.177.0.0/16")
	client := fake.NewClientset()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Client: client, ClusterCIDR: cidr, Backend: BackendVXLAN, NodeIP: net.ParseIP("192.168.5.1")}, "needs NodeName"},
		{Config{Client: client, ClusterCIDR: cidr, Backend: BackendVXLAN, NodeName: "me"}, "local IP <nil>"},
		{Config{Client: client, ClusterCIDR: cidr, Backend: BackendVXLAN, NodeName: "me", NodeIP: net.ParseIP("192.168.5.1"), VNI: -1}, "VNI -1"},
		{Config{Client: client, ClusterCIDR: cidr, Backend: "geneve"}, `Backend "geneve" is not one of`},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	c, err := New(Config{Client: client, ClusterCIDR: cidr, Backend: BackendVXLAN, NodeName: "me", NodeIP: net.ParseIP("192.168.5.1")})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.backend.(*vxlanBackend).dev; d.VNI != 1 || d.Port != 8472 {
		t.Errorf("defaults: VNI %d port %d, want flannel's 1 and 8472", d.VNI, d.Port)
	}
}

// TestVXLANSync: the device is ensured and takes the first address of this node's podCIDR; each peer with a
// VTEP of the same VNI gets a neighbour and forwarding entry (to its public IP, else its InternalIP) and an
// onlink route via its VTEP address; peers without a VTEP yet are waited for, peers of another backend,
// VNI or with unreadable data are refused with a Warning event; a changed address or podCIDR and a
// deleted Node are followed; this node's VTEP is published once on its Node.
func TestVXLANSync(t *testing.T) {
	me := vxNode("me", "10.177.1.0/24", "192.168.5.1", nil)
	b := vxNode("b", "10.177.2.0/24", "192.168.5.2", vtep(1, "0e:6b:c0:a8:05:02", "192.168.5.2"))
	c := vxNode("c", "10.177.3.0/24", "192.168.5.3", vtep(1, "0e:6b:c0:a8:05:03", "")) // no public IP: its InternalIP
	waiting := vxNode("new", "10.177.4.0/24", "192.168.5.4", nil)
	hostgw := vxNode("hgw", "10.177.5.0/24", "192.168.5.5", map[string]string{AnnotationBackendType: "host-gw"})
	vni2 := vxNode("vni2", "10.177.6.0/24", "192.168.5.6", vtep(2, "0e:6b:c0:a8:05:06", ""))
	badMAC := vxNode("badmac", "10.177.7.0/24", "192.168.5.7", vtep(1, "nope", ""))
	outside := vxNode("outside", "10.99.0.0/24", "192.168.5.8", vtep(1, "0e:6b:c0:a8:05:08", ""))
	ctrl, k, client, rec := newFakeVXLAN(t, me)
	ctx := context.Background()
	if err := ctrl.Sync(ctx, []*corev1.Node{me, b, c, waiting, hostgw, vni2, badMAC, outside}); err != nil {
		t.Fatal(err)
	}
	if k.dev == nil || k.dev.VNI != 1 || k.dev.Port != 8472 || !k.dev.LocalIP.Equal(net.ParseIP("192.168.5.1")) || k.addr != "10.177.1.0" {
		t.Fatalf("device %+v address %q, want VNI 1 port 8472 local 192.168.5.1, address 10.177.1.0", k.dev, k.addr)
	}
	wantPeers := []string{"b: 10.177.2.0 lladdr 0e:6b:c0:a8:05:02 dst 192.168.5.2", "c: 10.177.3.0 lladdr 0e:6b:c0:a8:05:03 dst 192.168.5.3"}
	wantRoutes := []string{"10.177.2.0/24 via 10.177.2.0 dev #7 onlink", "10.177.3.0/24 via 10.177.3.0 dev #7 onlink"}
	if fmt.Sprint(k.peers) != fmt.Sprint(wantPeers) || fmt.Sprint(k.routes) != fmt.Sprint(wantRoutes) {
		t.Fatalf("peers %q routes %q, want %q %q", k.peers, k.routes, wantPeers, wantRoutes)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	sort.Strings(events)
	if len(events) != 4 {
		t.Fatalf("events %q, want 4 (host-gw, VNI 2, bad MAC, outside the cluster CIDR)", events)
	}
	for i, want := range []string{`is "host-gw": the node runs another backend`, "VtepMAC \"nope\"", "VNI 2, this node's is 1", "not inside the cluster CIDR"} {
		found := false
		for _, e := range events {
			found = found || (strings.HasPrefix(e, "Warning "+ReasonVXLANPeer+" no vxlan route from me") && strings.Contains(e, want))
		}
		if !found {
			t.Errorf("event %d: none with %q in %q", i, want, events)
		}
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "me", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Annotations; a[AnnotationBackendType] != "vxlan" || a[AnnotationBackendData] != `{"VNI":1,"VtepMAC":"0e:6b:c0:a8:05:01"}` ||
		a[AnnotationPublicIP] != "192.168.5.1" {
		t.Errorf("published annotations %v", a)
	}
	// Published once: a sync with the annotated Node patches nothing.
	client.ClearActions()
	if err := ctrl.Sync(ctx, []*corev1.Node{got, b, c}); err != nil {
		t.Fatal(err)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("second sync made API calls %v", acts)
	}

	// b moves (public IP), c comes back with another podCIDR, the waiting node publishes; then b is deleted.
	b.Annotations[AnnotationPublicIP] = "192.168.6.2"
	c.Spec.PodCIDR, c.Spec.PodCIDRs = "10.177.9.0/24", []string{"10.177.9.0/24"}
	waiting.Annotations = vtep(1, "0e:6b:c0:a8:05:04", "")
	if err := ctrl.Sync(ctx, []*corev1.Node{got, b, c, waiting}); err != nil {
		t.Fatal(err)
	}
	wantPeers = []string{"b: 10.177.2.0 lladdr 0e:6b:c0:a8:05:02 dst 192.168.6.2", "c: 10.177.9.0 lladdr 0e:6b:c0:a8:05:03 dst 192.168.5.3",
		"new: 10.177.4.0 lladdr 0e:6b:c0:a8:05:04 dst 192.168.5.4"}
	if fmt.Sprint(k.peers) != fmt.Sprint(wantPeers) || len(k.routes) != 3 || k.routes[2] != "10.177.9.0/24 via 10.177.9.0 dev #7 onlink" {
		t.Fatalf("after changes: peers %q routes %q", k.peers, k.routes)
	}
	if err := ctrl.Sync(ctx, []*corev1.Node{got, c}); err != nil {
		t.Fatal(err)
	}
	if len(k.peers) != 1 || len(k.routes) != 1 || !strings.HasPrefix(k.peers[0], "c: ") {
		t.Errorf("after b and new were deleted: peers %q routes %q", k.peers, k.routes)
	}
}

// TestVXLANBeforeRegistration: without its Node yet, the device is made (no address: no podCIDR) and
// nothing is published; the peers are already tunnelled to.
func TestVXLANBeforeRegistration(t *testing.T) {
	ctrl, k, client, _ := newFakeVXLAN(t)
	b := vxNode("b", "10.177.2.0/24", "192.168.5.2", vtep(1, "0e:6b:c0:a8:05:02", ""))
	if err := ctrl.Sync(context.Background(), []*corev1.Node{b}); err != nil {
		t.Fatal(err)
	}
	if k.ensured != 1 || k.addr != "" || len(k.peers) != 1 || len(k.routes) != 1 {
		t.Errorf("ensured %d address %q peers %q routes %q", k.ensured, k.addr, k.peers, k.routes)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("patched without a Node: %v", a)
		}
	}
}
