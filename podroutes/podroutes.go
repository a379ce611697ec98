// Package podroutes is the node agent's route controller: it watches every Node and keeps, in the node's
// network namespace, the way to every other node's pods, through one backend (Config.Backend, the agent's
// --network-backend, flannel's --flannel-backend), each in a file of its own:
//   - host-gw (hostgw.go): one route per other node, "<its podCIDR> via <its InternalIP>" (cni/routes), for
//     nodes on one L2 segment; a node whose InternalIP is not on a directly connected network of this node
//     (it would need a gateway) is refused;
//   - vxlan (vxlan.go): as flannel's vxlan backend, a VXLAN device (cni/vxlan) whose VTEP this node
//     publishes in flannel's Node annotations, and per other node a route over the device, a neighbour and
//     a forwarding entry, so that nodes on any routed network reach each other's pods.
//
// This file is what the backends share: the Node watch, the podCIDR checks, the periodic resync (every
// Resync, so that what was removed by hand comes back), and the report of refused nodes (a warning log line
// and a Warning event on that Node, once per change of reason). A route is replaced when the node's address
// or podCIDR changes and removed when its Node is deleted.
//
// It reads all Nodes, which the Node authorizer does not let a node do: the bootstrap ClusterRole
// podnet.RouteReaderRole, bound to system:nodes, grants nodes get/list/watch (docs/access-control.md).
// What it made stays when it stops, so pod traffic survives an agent restart; `nodekit down` removes it.
package podroutes

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/internal/podnet"
)

// Backends a node's pod network can use between nodes (the agent's --network-backend, flannel's
// --flannel-backend): host-gw routes or vxlan tunnels by this controller, or none (the operator routes the
// podCIDRs; the agent runs no controller).
const (
	BackendHostGW = "host-gw"
	BackendVXLAN  = "vxlan"
	BackendNone   = "none"
)

// Backends lists the accepted backends, the default first.
var Backends = []string{BackendHostGW, BackendVXLAN, BackendNone}

// DefaultResync is how often the routes are checked against the kernel's table without a Node change.
const DefaultResync = 30 * time.Second

// backend is one way to the other nodes' pods. sync runs in the controller's namespace (on a locked
// thread): it makes the namespace reach peers (the other nodes' podCIDRs inside the cluster CIDR, Gw their
// InternalIPs; nodes by name, self this node's Node or nil) and returns the peers it refuses, with why.
// publish runs after a successful sync, outside the namespace: what this node tells the others on its
// Node. reason is the reason of the Warning event on a refused Node.
type backend interface {
	sync(self *corev1.Node, peers []routes.Route, nodes map[string]*corev1.Node) (refused map[string]string, err error)
	publish(ctx context.Context, self *corev1.Node) error
	reason() string
}

// Config is one route controller.
type Config struct {
	// Client reads the Nodes (get/list/watch on all of them) and, with vxlan, patches the annotations of
	// NodeName's. Required.
	Client kubernetes.Interface
	// NodeName is this node's Node, which gets no route; empty (a host without a Node, as `nodekit lab`'s
	// server) routes to every node.
	NodeName string
	// ClusterCIDR is the cluster's pod network: only podCIDRs inside it are routed, and only nodekit routes
	// inside it are ever removed. Required.
	ClusterCIDR *net.IPNet
	// NetNS is the network namespace the routes go to; nil: the process's.
	NetNS ns.NetNS
	// Backend is BackendHostGW (also when empty) or BackendVXLAN.
	Backend string
	// NodeIP is this node's IPv4 address, the tunnels' source and the public IP vxlan publishes; required
	// with BackendVXLAN (which needs NodeName too).
	NodeIP net.IP
	// VNI and Port are vxlan's VXLAN network identifier and UDP port; 0: vxlan.DefaultVNI (1) and
	// vxlan.DefaultPort (8472), flannel's.
	VNI, Port int
	// Resync is the period of the check against the kernel; 0: DefaultResync.
	Resync time.Duration
	// Recorder records the Warning events on refused Nodes; nil: none.
	Recorder record.EventRecorder
	// Logger receives one line per change; nil: slog.Default().
	Logger *slog.Logger
}

// Controller keeps the routes to the other nodes' pods of one network namespace.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	backend backend
	// refused is the reason each refused node got, so it is logged and recorded once per change.
	refused map[string]string
}

// New validates cfg and makes its backend.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("podroutes: Client is required")
	}
	if cfg.ClusterCIDR == nil || cfg.ClusterCIDR.IP.To4() == nil {
		return nil, fmt.Errorf("podroutes: ClusterCIDR %v: want the cluster's IPv4 pod network", cfg.ClusterCIDR)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{cfg: cfg, log: log.With("controller", "routes"), refused: map[string]string{}}
	switch cfg.Backend {
	case "", BackendHostGW:
		c.cfg.Backend, c.backend = BackendHostGW, hostGW{scope: cfg.ClusterCIDR, log: c.log.With("node", cfg.NodeName)}
	case BackendVXLAN:
		b, err := newVXLAN(c.cfg, c.log.With("node", cfg.NodeName), kernelTunnel{})
		if err != nil {
			return nil, err
		}
		c.backend = b
	default:
		return nil, fmt.Errorf("podroutes: Backend %q is not one of %s, %s", cfg.Backend, BackendHostGW, BackendVXLAN)
	}
	return c, nil
}

// Run watches the Nodes and keeps the routes until ctx ends, then returns nil, leaving the routes in
// place. Nothing is written before the Node cache is synced (a restart with an empty cache must not
// remove the routes of live nodes); a failed sync is logged and retried at the next change or Resync.
func (c *Controller) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(c.cfg.Client, 0)
	inf := f.Core().V1().Nodes()
	lister := inf.Lister()
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	_ = inf.Informer().SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		c.log.Error("cannot watch Nodes; the routes to other nodes are not kept current", "backend", c.cfg.Backend, "node", c.cfg.NodeName, "err", err,
			"needs", "get/list/watch nodes: ClusterRoleBinding "+podnet.RouteReaderRole+" to group system:nodes")
	})
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	c.log.Info("route controller started", "node", c.cfg.NodeName, "backend", c.cfg.Backend, "clusterCIDR", c.cfg.ClusterCIDR, "resync", c.cfg.Resync)
	t := time.NewTicker(c.cfg.Resync)
	defer t.Stop()
	for {
		nodes, err := lister.List(labels.Everything())
		if err == nil {
			err = c.Sync(ctx, nodes)
		}
		if err != nil {
			c.log.Error("routes not synced", "node", c.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-t.C:
		}
	}
}

// Sync makes the namespace's routes to the other nodes those of nodes, through the backend: every other
// node with an IPv4 podCIDR inside ClusterCIDR and an InternalIP that the backend can reach. It records the
// nodes it refuses, and (vxlan) publishes this node's VTEP on its Node.
func (c *Controller) Sync(ctx context.Context, nodes []*corev1.Node) error {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var peers []routes.Route
	refused := map[string]string{}
	for _, r := range routes.FromNodes(c.cfg.NodeName, nodes) {
		if !routes.Within(r.PodCIDR, c.cfg.ClusterCIDR) {
			refused[r.Node] = fmt.Sprintf("podCIDR %s is not inside the cluster CIDR %s", r.PodCIDR, c.cfg.ClusterCIDR)
			continue
		}
		peers = append(peers, r)
	}
	err := c.do(func() error {
		more, err := c.backend.sync(byName[c.cfg.NodeName], peers, byName)
		for name, why := range more {
			refused[name] = why
		}
		return err
	})
	c.report(refused, byName)
	if err != nil {
		return err
	}
	return c.backend.publish(ctx, byName[c.cfg.NodeName])
}

// report logs and records the nodes newly refused (or refused for a new reason) and forgets the others.
func (c *Controller) report(refused map[string]string, nodes map[string]*corev1.Node) {
	for name, reason := range refused {
		if c.refused[name] == reason {
			continue
		}
		from := c.cfg.NodeName
		if from == "" {
			from = "the host"
		}
		c.log.Warn("no route to node", "node", c.cfg.NodeName, "peer", name, "backend", c.cfg.Backend, "reason", reason)
		if c.cfg.Recorder != nil && nodes[name] != nil {
			c.cfg.Recorder.Eventf(nodes[name], corev1.EventTypeWarning, c.backend.reason(), "no %s route from %s to this node's pods: %s", c.cfg.Backend, from, reason)
		}
	}
	for name := range c.refused {
		if _, still := refused[name]; !still && nodes[name] != nil {
			c.log.Info("node routable again", "node", c.cfg.NodeName, "peer", name)
		}
	}
	c.refused = refused
}

// do runs fn in NetNS (on one locked OS thread), or in the calling thread's namespace without one.
func (c *Controller) do(fn func() error) error {
	if c.cfg.NetNS == nil {
		return fn()
	}
	return c.cfg.NetNS.Do(func(ns.NetNS) error { return fn() })
}
