package cni_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/test/framework/netns"
)

var binDir string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("skipping test/e2e/cni: needs root for network namespaces")
		os.Exit(0)
	}
	var err error
	binDir, err = cnitest.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cnitest.Cleanup()
	os.Exit(code)
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is one simulated node running nodekit-cni from a conflist rendered by cni/config.
type env struct {
	t       *testing.T
	lab     *netns.Lab
	node    *netns.Node
	opts    config.Options
	rt      *cnitest.Runtime
	podCIDR *net.IPNet
	gateway net.IP
}

func newEnv(t *testing.T, lab *netns.Lab, podCIDR, clusterCIDR string) *env {
	t.Helper()
	if lab == nil {
		lab = netns.NewForTest(t, netns.Options{})
	}
	node := lab.MustAddNode(t, "node-"+suffix())
	opts := config.Options{
		Path:        t.TempDir() + "/10-nodekit.conflist",
		NetworkName: "nk-e2e-" + suffix(),
		PodCIDR:     podCIDR,
		ClusterCIDR: clusterCIDR,
		Bridge:      "nk" + suffix(),
		MTU:         1400,
		DataDir:     t.TempDir(),
		BinDirs:     []string{binDir},
	}
	if _, err := config.Write(opts); err != nil {
		t.Fatal(err)
	}
	if err := config.Ready(context.Background(), opts.Path, binDir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(opts.Path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cnitest.NewRuntime(b, t.TempDir(), binDir)
	if err != nil {
		t.Fatal(err)
	}
	_, sn, _ := net.ParseCIDR(podCIDR)
	gw := make(net.IP, 4)
	copy(gw, sn.IP.To4())
	gw[3]++
	return &env{t: t, lab: lab, node: node, opts: opts, rt: rt, podCIDR: sn, gateway: gw}
}

// pod is one attachment made by env.add.
type pod struct {
	ns  ns.NetNS
	rc  *libcni.RuntimeConf
	res *current.Result
	ip  net.IP
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// tryAdd creates a pod netns and runs ADD for it on the node.
func (e *env) tryAdd(capArgs map[string]any) (*pod, error) {
	e.t.Helper()
	pn, err := e.lab.NewPodNS()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &pod{ns: pn, rc: cnitest.Attachment("ctr-"+suffix()+suffix(), pn.Path(), "eth0", capArgs)}
	err = e.node.Do(func() error {
		var err error
		p.res, err = e.rt.Add(ctx(e.t), p.rc)
		return err
	})
	if err != nil {
		return p, err
	}
	if len(p.res.IPs) != 1 {
		e.t.Fatalf("ADD result has %d IPs, want 1: %+v", len(p.res.IPs), p.res)
	}
	p.ip = p.res.IPs[0].Address.IP
	return p, nil
}

// add is tryAdd that fails the test on error and DELs the pod at cleanup.
func (e *env) add(capArgs map[string]any) *pod {
	e.t.Helper()
	p, err := e.tryAdd(capArgs)
	if err != nil {
		e.t.Fatalf("ADD: %v", err)
	}
	e.t.Cleanup(func() { _ = e.del(p) })
	return p
}

func (e *env) del(p *pod) error {
	return e.node.Do(func() error { return e.rt.Del(context.Background(), p.rc) })
}

func (e *env) check(p *pod) error {
	return e.node.Do(func() error { return e.rt.Check(ctx(e.t), p.rc) })
}

func (e *env) store() *ipam.Store {
	e.t.Helper()
	s, err := ipam.Open(e.opts.DataDir, e.opts.NetworkName, []ipam.Range{{Subnet: *e.podCIDR}})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// nodeLinks lists the node's interface names.
func (e *env) nodeLinks() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	err := e.node.Do(func() error {
		ls, err := netlink.LinkList()
		for _, l := range ls {
			out[l.Attrs().Name] = true
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// serveEcho listens on addr inside n and serves echo until the test ends; it returns the bound address.
func serveEcho(t *testing.T, n ns.NetNS, addr string) string {
	t.Helper()
	l, err := netns.Listen(n, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go netns.ServeEcho(l)
	return l.Addr().String()
}
