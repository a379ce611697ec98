// Package teardown removes what a node's pod network left on the host, next to the packages that set
// it up: the CNI plugin's masquerade and portmap chains (cni/masq, cni/portmap), the node bridge
// (cni/bridge's), the routes to other nodes inside the cluster CIDR (cni/routes', kept by the agent's
// route controller), the vxlan backend's device with its entries (cni/vxlan's), and with Purge the conflist (cni/config's) and the IPAM store (cni/ipam's). It reads
// the layout back from the conflist (config.Read), so a network written with other names or
// directories is torn down as written. The pods must be gone already (their veths and per-pod chains
// go with their sandboxes).
package teardown

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/coreos/go-iptables/iptables"
	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/cni/vxlan"
)

// Options say which network to tear down and how far.
type Options struct {
	// ConfList is the conflist the network was set up from (default config.DefaultPath). When it does
	// not exist, config's defaults name the network, bridge and IPAM store.
	ConfList string
	// Purge also removes the conflist and the IPAM store.
	Purge bool
	// OwnedDir is the data directory of whoever set the network up: an IPAM store under it is removed
	// with Purge even while it holds allocations. A store elsewhere (a shared one such as
	// /var/lib/nodekit/cni) is removed only when no address is allocated in it.
	OwnedDir string
	// Logger receives one line per step; default slog.Default().
	Logger *slog.Logger
}

// Network removes the network's iptables chains, its bridge (when that link is a bridge), the nodekit
// routes inside its cluster CIDR (none when no conflist names it), the nodekit.<VNI> VXLAN devices, and
// with Purge its conflist and IPAM store. Missing pieces are not errors; every step runs, and the
// errors are joined.
func Network(o Options) error {
	if o.ConfList == "" {
		o.ConfList = config.DefaultPath
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	nw, err := config.Read(o.ConfList)
	if errors.Is(err, os.ErrNotExist) {
		nw, err = config.Options{Path: o.ConfList}, nil
		nw.Defaults()
	}
	if err != nil {
		return err
	}
	errs := []error{removeChains(nw, log), removeBridge(nw.Bridge, log), removeRoutes(nw.ClusterCIDR, log), removeVXLAN(log)}
	if o.Purge {
		errs = append(errs, removeConfList(o.ConfList, log), removeIPAMStore(nw, o.OwnedDir, log))
	}
	return errors.Join(errs...)
}

// removeChains removes the masquerade rules of the network's podCIDR and its portmap entry chains.
func removeChains(o config.Options, log *slog.Logger) error {
	var podCIDRs []*net.IPNet
	if _, n, err := net.ParseCIDR(o.PodCIDR); err == nil {
		podCIDRs = append(podCIDRs, n)
	}
	ipt, err := iptables.New()
	if err != nil {
		return fmt.Errorf("cni teardown: %w", err)
	}
	log.Info("removing the pod network's rules", "network", o.NetworkName, "podCIDRs", podCIDRs)
	return errors.Join(masq.Teardown(ipt, o.NetworkName, podCIDRs), portmap.Teardown(ipt, o.NetworkName))
}

// removeRoutes deletes the host-gw routes (cni/routes' protocol) inside clusterCIDR; none without one.
func removeRoutes(clusterCIDR string, log *slog.Logger) error {
	if clusterCIDR == "" {
		return nil
	}
	_, scope, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		return fmt.Errorf("cni teardown: cluster CIDR %q: %w", clusterCIDR, err)
	}
	_, removed, err := routes.Sync(nil, scope)
	if removed > 0 {
		log.Info("removed the host-gw routes", "clusterCIDR", scope, "routes", removed)
	}
	if err != nil {
		return fmt.Errorf("cni teardown: %w", err)
	}
	return nil
}

// removeVXLAN deletes the vxlan backend's device (cni/vxlan), and with it its routes and entries.
func removeVXLAN(log *slog.Logger) error {
	gone, err := vxlan.Teardown()
	if len(gone) > 0 {
		log.Info("removed the vxlan device", "devices", gone)
	}
	if err != nil {
		return fmt.Errorf("cni teardown: %w", err)
	}
	return nil
}

// removeBridge deletes the link named bridge when it is a bridge (a link of another kind with that
// name is not ours).
func removeBridge(bridge string, log *slog.Logger) error {
	link, err := netlink.LinkByName(bridge)
	if err != nil {
		return nil // gone already
	}
	if _, ok := link.(*netlink.Bridge); !ok {
		return nil
	}
	log.Info("removing the node bridge", "bridge", bridge)
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("cni teardown: delete bridge %s: %w", bridge, err)
	}
	return nil
}

func removeConfList(path string, log *slog.Logger) error {
	err := os.Remove(path)
	if err == nil {
		log.Info("removed the CNI conflist", "path", path)
		return nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("cni teardown: %w", err)
}

func removeIPAMStore(o config.Options, ownedDir string, log *slog.Logger) error {
	store := ipam.Dir(o.DataDir, o.NetworkName)
	if !(ownedDir != "" && within(store, ownedDir)) {
		n, err := ipam.Allocated(o.DataDir, o.NetworkName)
		if err != nil {
			return fmt.Errorf("cni teardown: %w", err)
		}
		if n > 0 {
			log.Warn("IPAM store outside the data dir still holds allocations; left in place", "dir", store, "allocated", n)
			return nil
		}
	}
	if err := os.RemoveAll(store); err != nil {
		return fmt.Errorf("cni teardown: %w", err)
	}
	return nil
}

// within reports whether path lies under dir (or is dir).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
