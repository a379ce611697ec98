// Package netns simulates a small cluster's network on one host for tests: a lab is a hub network
// namespace holding an L2 bridge, and each node is a network namespace with an eth0 on that bridge and
// its own IP, so node-level networking (bridges, routes, iptables, sysctls) is isolated from the host and
// from other labs. Pods are further namespaces. Everything is removed by Close (or the test's cleanup).
//
// Code runs inside a node either in-process (Node.Do, which switches one locked OS thread; sockets created
// there stay in the node's namespace) or as a process (Node.Command, through nsenter).
package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// DefaultSubnet is the lab segment's subnet unless Options says otherwise; the hub is isolated, so labs
// never collide even when they use the same subnet.
const DefaultSubnet = "10.199.0.0/24"

// Options tune New.
type Options struct {
	// Subnet is the lab segment; node i (from 0) gets host address i+2. Default DefaultSubnet.
	Subnet string
	// MTU of the lab links, default 1500.
	MTU int
}

// Lab is a hub namespace with bridge "lab0" and the nodes attached to it.
type Lab struct {
	Hub    ns.NetNS
	Subnet *net.IPNet
	mtu    int

	mu    sync.Mutex
	nodes []*Node
	pods  []ns.NetNS
}

// Node is one simulated node.
type Node struct {
	Name string
	// NS is the node's network namespace; its eth0 holds IP on the lab subnet.
	NS ns.NetNS
	IP net.IP
}

// New creates a lab. Close it when done.
func New(o Options) (*Lab, error) {
	if o.Subnet == "" {
		o.Subnet = DefaultSubnet
	}
	if o.MTU == 0 {
		o.MTU = 1500
	}
	_, sn, err := net.ParseCIDR(o.Subnet)
	if err != nil || sn.IP.To4() == nil {
		return nil, fmt.Errorf("netns: Options.Subnet %q is not an IPv4 CIDR", o.Subnet)
	}
	hub, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("netns: hub namespace: %w", err)
	}
	l := &Lab{Hub: hub, Subnet: sn, mtu: o.MTU}
	err = hub.Do(func(ns.NetNS) error {
		if err := linkUp("lo"); err != nil {
			return err
		}
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = "lab0", o.MTU
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return fmt.Errorf("netns: bridge lab0: %w", err)
		}
		return linkUp("lab0")
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// NewForTest creates a lab removed by t's cleanup; it fails t on error.
func NewForTest(t testing.TB, o Options) *Lab {
	t.Helper()
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("netns lab cleanup: %v", err)
		}
	})
	return l
}

// AddNode creates a node namespace with loopback up and eth0 (the peer of port "n<index>" on lab0) holding
// the next lab address.
func (l *Lab) AddNode(name string) (*Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := len(l.nodes)
	addr := make(net.IP, 4)
	copy(addr, l.Subnet.IP.To4())
	addr[3] += byte(idx + 2)
	if !l.Subnet.Contains(addr) || idx+2 > 250 {
		return nil, fmt.Errorf("netns: lab subnet %s has no room for node %d", l.Subnet, idx)
	}
	nodeNS, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("netns: node %s: %w", name, err)
	}
	n := &Node{Name: name, NS: nodeNS, IP: addr}
	l.nodes = append(l.nodes, n)
	port := fmt.Sprintf("n%d", idx)
	err = l.Hub.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = port, l.mtu
		veth := &netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(nodeNS.Fd()))}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("netns: veth %s for node %s: %w", port, name, err)
		}
		br, err := netlink.LinkByName("lab0")
		if err != nil {
			return err
		}
		p, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMaster(p, br); err != nil {
			return err
		}
		return netlink.LinkSetUp(p)
	})
	if err == nil {
		err = nodeNS.Do(func(ns.NetNS) error {
			if err := linkUp("lo"); err != nil {
				return err
			}
			eth, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			ones, _ := l.Subnet.Mask.Size()
			if err := netlink.AddrAdd(eth, &netlink.Addr{IPNet: &net.IPNet{IP: addr, Mask: net.CIDRMask(ones, 32)}}); err != nil {
				return err
			}
			return netlink.LinkSetUp(eth)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("netns: node %s: %w", name, err)
	}
	return n, nil
}

// MustAddNode is AddNode failing t on error.
func (l *Lab) MustAddNode(t testing.TB, name string) *Node {
	t.Helper()
	n, err := l.AddNode(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// NewPodNS creates an empty namespace (for a pod), removed by Close unless removed earlier with
// RemovePodNS.
func (l *Lab) NewPodNS() (ns.NetNS, error) {
	p, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("netns: pod namespace: %w", err)
	}
	l.mu.Lock()
	l.pods = append(l.pods, p)
	l.mu.Unlock()
	return p, nil
}

// RemovePodNS deletes a pod namespace made by NewPodNS now.
func (l *Lab) RemovePodNS(p ns.NetNS) error {
	l.mu.Lock()
	for i, q := range l.pods {
		if q == p {
			l.pods = append(l.pods[:i], l.pods[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	return remove(p)
}

// Close removes every pod and node namespace and the hub (deleting a namespace deletes its links, routes
// and iptables rules). Errors are joined; Close is safe to call twice.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, p := range l.pods {
		errs = append(errs, remove(p))
	}
	for _, n := range l.nodes {
		errs = append(errs, remove(n.NS))
	}
	if l.Hub != nil {
		errs = append(errs, remove(l.Hub))
	}
	l.pods, l.nodes, l.Hub = nil, nil, nil
	return errors.Join(errs...)
}

func remove(n ns.NetNS) error {
	n.Close()
	return testutils.UnmountNS(n)
}

// Do runs fn with the calling goroutine's OS thread switched into the node's namespace.
func (n *Node) Do(fn func() error) error {
	return n.NS.Do(func(ns.NetNS) error { return fn() })
}

// Command returns a command that runs name with args inside the node's namespace (via nsenter). The
// caller starts it and owns the process.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return Command(ctx, n.NS.Path(), name, args...)
}

// Command returns a command that runs name with args inside the network namespace at nsPath.
func Command(ctx context.Context, nsPath, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + nsPath, "--", name}, args...)...)
}

// Listen opens a listener ("tcp" or "udp" style address, e.g. "10.0.0.5:0") inside netNS; the socket stays
// in that namespace whichever goroutine uses it later.
func Listen(netNS ns.NetNS, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := netNS.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ServeEcho answers every connection on l by writing back what it reads, until l is closed.
func ServeEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(c, c)
		}()
	}
}

// Echo connects from inside netNS (nil: the caller's namespace) to a ServeEcho server at addr over TCP,
// sends a message and checks it comes back, all within timeout.
func Echo(netNS ns.NetNS, addr string, timeout time.Duration) error {
	var c net.Conn
	dial := func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	}
	var err error
	if netNS == nil {
		err = dial(nil)
	} else {
		err = netNS.Do(dial)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	msg := []byte("nodekit echo " + addr)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != string(msg) {
		return fmt.Errorf("echo from %s: got %q, want %q", addr, got, msg)
	}
	return nil
}

func linkUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}
