package cni_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/plugin"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/test/framework/netns"
)

// TestAddWiresPod: ADD gives the pod eth0 with an address in the podCIDR, lo up and a default route via the
// gateway; the pod reaches the gateway (the node) and another pod on the same bridge.
func TestAddWiresPod(t *testing.T) {
	e := newEnv(t, nil, "10.244.1.0/24", "10.244.0.0/16")
	a, b := e.add(nil), e.add(nil)
	if a.ip.Equal(b.ip) {
		t.Fatalf("two pods got the same IP %s", a.ip)
	}
	for _, p := range []*pod{a, b} {
		err := p.ns.Do(func(ns.NetNS) error {
			eth, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			if eth.Attrs().Flags&net.FlagUp == 0 || eth.Attrs().MTU != 1400 {
				return fmt.Errorf("eth0 is not up with the configured MTU 1400: flags %v mtu %d", eth.Attrs().Flags, eth.Attrs().MTU)
			}
			addrs, err := netlink.AddrList(eth, netlink.FAMILY_V4)
			if err != nil || len(addrs) != 1 {
				return errors.New("eth0 does not hold exactly one IPv4 address")
			}
			if !addrs[0].IP.Equal(p.ip) || !e.podCIDR.Contains(addrs[0].IP) {
				t.Errorf("eth0 has %s; result says %s; podCIDR %s", addrs[0].IPNet, p.ip, e.podCIDR)
			}
			routes, err := netlink.RouteList(eth, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			def := false
			for _, r := range routes {
				if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.Equal(e.gateway) {
					def = true
				}
			}
			if !def {
				t.Errorf("pod %s has no default route via %s: %v", p.ip, e.gateway, routes)
			}
			lo, err := netlink.LinkByName("lo")
			if err != nil || lo.Attrs().Flags&net.FlagUp == 0 {
				t.Errorf("pod loopback is not up")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Result shape: bridge, host veth, pod eth0 (sandbox).
	if n := len(a.res.Interfaces); n != 3 || a.res.Interfaces[0].Name != e.opts.Bridge ||
		a.res.Interfaces[2].Name != "eth0" || a.res.Interfaces[2].Sandbox != a.ns.Path() {
		t.Errorf("unexpected interfaces in result: %+v", a.res.Interfaces)
	}
	gwAddr := serveEcho(t, e.node.NS, net.JoinHostPort(e.gateway.String(), "0"))
	if err := netns.Echo(a.ns, gwAddr, 5*time.Second); err != nil {
		t.Errorf("pod %s -> gateway %s: %v", a.ip, gwAddr, err)
	}
	peerAddr := serveEcho(t, b.ns, net.JoinHostPort(b.ip.String(), "0"))
	if err := netns.Echo(a.ns, peerAddr, 5*time.Second); err != nil {
		t.Errorf("pod %s -> pod %s: %v", a.ip, peerAddr, err)
	}
	// Hairpin is on for the node veth.
	err := e.node.Do(func() error {
		l, err := netlink.LinkByName(bridge.HostVethName(a.rc.ContainerID, "eth0"))
		if err != nil {
			return err
		}
		pi, err := netlink.LinkGetProtinfo(l)
		if err != nil {
			return err
		}
		if !pi.Hairpin {
			t.Errorf("hairpin is off on %s", l.Attrs().Name)
		}
		if l.Attrs().MTU != 1400 {
			t.Errorf("node veth MTU %d, want 1400", l.Attrs().MTU)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// ip_forward is on in the node.
	out, err := e.node.Command(context.Background(), "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("node ip_forward = %q (%v), want 1", out, err)
	}
}

// TestCheckDetectsDeletedVeth: CHECK passes after ADD and fails once the node veth is deleted by hand.
func TestCheckDetectsDeletedVeth(t *testing.T) {
	e := newEnv(t, nil, "10.244.2.0/24", "10.244.0.0/16")
	p := e.add(nil)
	if err := e.check(p); err != nil {
		t.Fatalf("CHECK after ADD: %v", err)
	}
	veth := bridge.HostVethName(p.rc.ContainerID, "eth0")
	err := e.node.Do(func() error {
		l, err := netlink.LinkByName(veth)
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.check(p)
	if err == nil {
		t.Fatal("CHECK passed after the veth was deleted")
	}
	if !strings.Contains(err.Error(), veth) {
		t.Errorf("CHECK error does not name the missing veth %s: %v", veth, err)
	}
}

// TestDelIsIdempotent: DEL removes the veth pair and frees the IP; a second DEL and a DEL whose netns is
// gone succeed.
func TestDelIsIdempotent(t *testing.T) {
	e := newEnv(t, nil, "10.244.3.0/24", "10.244.0.0/16")
	p := e.add(nil)
	veth := bridge.HostVethName(p.rc.ContainerID, "eth0")
	if !e.nodeLinks()[veth] {
		t.Fatalf("node veth %s missing after ADD", veth)
	}
	if err := e.del(p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if e.nodeLinks()[veth] {
		t.Errorf("node veth %s still present after DEL", veth)
	}
	err := p.ns.Do(func(ns.NetNS) error {
		if _, err := netlink.LinkByName("eth0"); err == nil {
			t.Errorf("pod eth0 still present after DEL")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.store().Lookup(p.rc.ContainerID, "eth0"); err != nil || ok {
		t.Errorf("IP still allocated after DEL (ok=%v err=%v)", ok, err)
	}
	if err := e.del(p); err != nil {
		t.Errorf("second DEL: %v", err)
	}

	q := e.add(nil)
	if err := e.lab.RemovePodNS(q.ns); err != nil {
		t.Fatal(err)
	}
	if err := e.del(q); err != nil {
		t.Errorf("DEL with the netns gone: %v", err)
	}
	if _, ok, _ := e.store().Lookup(q.rc.ContainerID, "eth0"); ok {
		t.Errorf("IP of %s still allocated after DEL without netns", q.rc.ContainerID)
	}
	if e.nodeLinks()[bridge.HostVethName(q.rc.ContainerID, "eth0")] {
		t.Errorf("node veth of %s left behind", q.rc.ContainerID)
	}
}

// TestConcurrentAdds: 100 ADDs at once get 100 distinct IPs in the podCIDR.
func TestConcurrentAdds(t *testing.T) {
	e := newEnv(t, nil, "10.244.4.0/24", "10.244.0.0/16")
	const n = 100
	pods := make([]*pod, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pods[i], errs[i] = e.tryAdd(nil)
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i, p := range pods {
		if p != nil && p.rc != nil {
			t.Cleanup(func() { _ = e.del(p) })
		}
		if errs[i] != nil {
			t.Errorf("ADD %d: %v", i, errs[i])
			continue
		}
		if !e.podCIDR.Contains(p.ip) || p.ip.Equal(e.gateway) {
			t.Errorf("ADD %d got %s, outside %s or the gateway", i, p.ip, e.podCIDR)
		}
		if j, dup := seen[p.ip.String()]; dup {
			t.Errorf("ADD %d and %d both got %s", j, i, p.ip)
		}
		seen[p.ip.String()] = i
	}
	if len(seen) != n {
		t.Fatalf("%d distinct IPs, want %d", len(seen), n)
	}
	all, err := e.store().List()
	if err != nil || len(all) != n {
		t.Fatalf("store holds %d allocations (err %v), want %d", len(all), err, n)
	}
}

// TestGCFreesLeakedIPs: GC releases the allocations (and veths) of attachments missing from
// cni.dev/valid-attachments and keeps the valid one.
func TestGCFreesLeakedIPs(t *testing.T) {
	e := newEnv(t, nil, "10.244.5.0/24", "10.244.0.0/16")
	hp := map[string]any{"portMappings": []map[string]any{{"hostPort": 18081, "containerPort": 80}}}
	keep, leak1, leak2 := e.add(nil), e.add(hp), e.add(nil)
	hpChain := portmap.PodChain(e.opts.NetworkName, leak1.rc.ContainerID, "eth0")
	if out, _ := e.node.Command(context.Background(), "iptables", "-t", "nat", "-S").CombinedOutput(); !strings.Contains(string(out), hpChain) {
		t.Fatalf("hostPort chain %s missing after ADD:\n%s", hpChain, out)
	}
	err := e.node.Do(func() error { return e.rt.GC(ctx(t), []*libcni.RuntimeConf{keep.rc}) })
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	all, err := e.store().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ContainerID != keep.rc.ContainerID || !all[0].IP.Equal(keep.ip) {
		t.Fatalf("after GC the store holds %+v, want only %s/%s", all, keep.rc.ContainerID, keep.ip)
	}
	links := e.nodeLinks()
	for _, p := range []*pod{leak1, leak2} {
		if links[bridge.HostVethName(p.rc.ContainerID, "eth0")] {
			t.Errorf("GC left the veth of %s", p.rc.ContainerID)
		}
	}
	if !links[bridge.HostVethName(keep.rc.ContainerID, "eth0")] {
		t.Errorf("GC removed the veth of the valid attachment")
	}
	if err := e.check(keep); err != nil {
		t.Errorf("CHECK of the kept pod after GC: %v", err)
	}
	out, _ := e.node.Command(context.Background(), "iptables", "-t", "nat", "-S").CombinedOutput()
	if strings.Contains(string(out), hpChain) {
		t.Errorf("GC left the hostPort chain %s of a stale attachment:\n%s", hpChain, out)
	}
}

// TestGCRemovesStaleNetNS: an allocation record (the documented ips/<ip> format) whose attachment is not
// valid has its network namespace unmounted and removed by GC; a path that is not a namespace mount is
// left alone.
func TestGCRemovesStaleNetNS(t *testing.T) {
	e := newEnv(t, nil, "10.244.7.0/24", "10.244.0.0/16")
	stale, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	stale.Close()
	t.Cleanup(func() {
		if _, err := os.Stat(stale.Path()); err == nil {
			_ = testutils.UnmountNS(stale)
		}
	})
	plain := filepath.Join(t.TempDir(), "not-a-netns")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ips := filepath.Join(e.opts.DataDir, e.opts.NetworkName, "ips")
	if err := os.MkdirAll(ips, 0o700); err != nil {
		t.Fatal(err)
	}
	for ip, rec := range map[string]string{"10.244.7.200": "gone-1\neth0\n" + stale.Path() + "\n", "10.244.7.201": "gone-2\neth0\n" + plain + "\n"} {
		if err := os.WriteFile(filepath.Join(ips, ip), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.node.Do(func() error { return e.rt.GC(ctx(t), nil) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if _, err := os.Stat(stale.Path()); !os.IsNotExist(err) {
		t.Errorf("GC left the stale attachment's network namespace %s: %v", stale.Path(), err)
	}
	if _, err := os.Stat(plain); err != nil {
		t.Errorf("GC removed %s, which is not a network namespace: %v", plain, err)
	}
	if all, err := e.store().List(); err != nil || len(all) != 0 {
		t.Errorf("after GC the store holds %+v (%v), want nothing", all, err)
	}
}

// TestExhaustion: a /29 has 5 pod addresses (6 usable minus the gateway); the 6th ADD fails with the
// plugin's exhaustion code and a clear message, leaving nothing behind.
func TestExhaustion(t *testing.T) {
	e := newEnv(t, nil, "10.244.6.0/29", "10.244.0.0/16")
	for range 5 {
		e.add(nil)
	}
	before := e.nodeLinks()
	p, err := e.tryAdd(nil)
	if err == nil {
		t.Cleanup(func() { _ = e.del(p) })
		t.Fatalf("6th ADD on a /29 succeeded with %s", p.ip)
	}
	var te *types.Error
	if !errors.As(err, &te) || te.Code != plugin.ErrIPExhausted || !strings.Contains(te.Error(), "10.244.6.0/29") {
		t.Fatalf("6th ADD error = %#v, want code %d naming 10.244.6.0/29", err, plugin.ErrIPExhausted)
	}
	t.Logf("exhaustion error: %v", te)
	after := e.nodeLinks()
	if len(after) != len(before) {
		t.Errorf("failed ADD changed the node's links: %d -> %d", len(before), len(after))
	}
	if all, _ := e.store().List(); len(all) != 5 {
		t.Errorf("store holds %d allocations after a failed ADD, want 5", len(all))
	}
}

// TestBadConfig: invalid configurations return a CNI error result (code and message) on stdout and leave
// no interface or allocation behind.
func TestBadConfig(t *testing.T) {
	lab := netns.NewForTest(t, netns.Options{})
	node := lab.MustAddNode(t, "bad")
	dataDir := t.TempDir()
	pn, err := lab.NewPodNS()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		conf string
		code uint
		msg  string
	}{
		{"garbage JSON", `{"cniVersion": "1.1.0", "name": nk-bad`, types.ErrDecodingFailure, "unmarshal"},
		{"unknown cniVersion", `{"cniVersion":"9.9.9","name":"nk-bad","type":"nodekit-cni","ipam":{"ranges":[{"subnet":"10.9.0.0/24"}],"dataDir":"DATA"}}`, types.ErrIncompatibleCNIVersion, "version"},
		{"missing subnet", `{"cniVersion":"1.1.0","name":"nk-bad","type":"nodekit-cni","ipam":{"ranges":[{"rangeStart":"10.9.0.10"}],"dataDir":"DATA"}}`, types.ErrInvalidNetworkConfig, "ipam.ranges[0].subnet"},
		{"no ranges", `{"cniVersion":"1.1.0","name":"nk-bad","type":"nodekit-cni","ipam":{"dataDir":"DATA"}}`, types.ErrInvalidNetworkConfig, "ipam.ranges"},
		{"overlapping ranges", `{"cniVersion":"1.1.0","name":"nk-bad","type":"nodekit-cni","ipam":{"ranges":[{"subnet":"10.9.0.0/24"},{"subnet":"10.9.0.0/25"}],"dataDir":"DATA"}}`, types.ErrInvalidNetworkConfig, "overlaps"},
		{"rangeStart outside subnet", `{"cniVersion":"1.1.0","name":"nk-bad","type":"nodekit-cni","ipam":{"ranges":[{"subnet":"10.9.0.0/24","rangeStart":"10.8.0.1"}],"dataDir":"DATA"}}`, types.ErrInvalidNetworkConfig, "rangeStart"},
		{"bad mtu", `{"cniVersion":"1.1.0","name":"nk-bad","type":"nodekit-cni","mtu":20,"ipam":{"ranges":[{"subnet":"10.9.0.0/24"}],"dataDir":"DATA"}}`, types.ErrInvalidNetworkConfig, "mtu"},
	}
	plug := filepath.Join(binDir, "nodekit-cni")
	var linksBefore []string
	listLinks := func() []string {
		var names []string
		_ = node.Do(func() error {
			ls, err := netlink.LinkList()
			for _, l := range ls {
				names = append(names, l.Attrs().Name)
			}
			return err
		})
		sort.Strings(names)
		return names
	}
	linksBefore = listLinks()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := strings.ReplaceAll(c.conf, "DATA", dataDir)
			for _, cmd := range []string{"ADD", "CHECK"} {
				cmdr := node.Command(context.Background(), plug)
				cmdr.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=bad-" + suffix(), "CNI_NETNS=" + pn.Path(),
					"CNI_IFNAME=eth0", "CNI_PATH=" + binDir}
				cmdr.Stdin = strings.NewReader(conf)
				out, err := cmdr.Output()
				if err == nil {
					t.Fatalf("%s with %s succeeded: %s", cmd, c.name, out)
				}
				te, derr := cnitest.DecodeError(out)
				if derr != nil {
					t.Fatalf("%s: stdout is not a CNI error result: %v: %q", cmd, derr, out)
				}
				if te.Code != c.code || !strings.Contains(te.Msg+" "+te.Details, c.msg) {
					t.Errorf("%s: got code %d %q/%q, want code %d mentioning %q", cmd, te.Code, te.Msg, te.Details, c.code, c.msg)
				}
			}
		})
	}
	if after := listLinks(); strings.Join(after, ",") != strings.Join(linksBefore, ",") {
		t.Errorf("bad configs changed the node's links: %v -> %v", linksBefore, after)
	}
	_ = pn.Do(func(ns.NetNS) error {
		if _, err := netlink.LinkByName("eth0"); err == nil {
			t.Errorf("a bad config left eth0 in the pod")
		}
		return nil
	})
	ents, _ := filepath.Glob(filepath.Join(dataDir, "*", "ips", "*"))
	if len(ents) != 0 {
		t.Errorf("bad configs left allocations: %v", ents)
	}
	_ = os.RemoveAll(dataDir)
}

// TestVersionAndStatus: VERSION lists spec 1.1.0; STATUS succeeds for a usable configuration and answers
// code 50 (plugin not available) when the IPAM data directory cannot be used.
func TestVersionAndStatus(t *testing.T) {
	e := newEnv(t, nil, "10.244.7.0/24", "10.244.0.0/16")
	vi, err := e.rt.CNI.GetVersionInfo(ctx(t), "nodekit-cni")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(vi.SupportedVersions(), "1.1.0") {
		t.Errorf("VERSION lists %v, want 1.1.0 among them", vi.SupportedVersions())
	}
	if err := e.node.Do(func() error { return e.rt.CNI.GetStatusNetworkList(ctx(t), e.rt.List) }); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.opts.DataDir = filepath.Join(blocker, "ipam") // below a regular file: cannot be created
	e.opts.BinDirs = nil
	b, err := config.Render(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := cnitest.NewRuntime(b, t.TempDir(), binDir)
	if err != nil {
		t.Fatal(err)
	}
	err = e.node.Do(func() error { return bad.CNI.GetStatusNetworkList(ctx(t), bad.List) })
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with an unusable data dir = %#v, want code %d", err, types.ErrPluginNotAvailable)
	}
}

// TestFailedAddRollsBack: an ADD that fails after allocating (the pod already has an eth0) releases its IP
// and leaves no veth on the node.
func TestFailedAddRollsBack(t *testing.T) {
	e := newEnv(t, nil, "10.244.8.0/24", "10.244.0.0/16")
	pn, err := e.lab.NewPodNS()
	if err != nil {
		t.Fatal(err)
	}
	err = pn.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la})
	})
	if err != nil {
		t.Fatal(err)
	}
	before := e.nodeLinks()
	rc := cnitest.Attachment("ctr-rollback-"+suffix(), pn.Path(), "eth0", nil)
	err = e.node.Do(func() error { _, err := e.rt.Add(ctx(t), rc); return err })
	if err == nil {
		t.Fatal("ADD into a pod that already has eth0 succeeded")
	}
	t.Logf("ADD failed as expected: %v", err)
	if all, _ := e.store().List(); len(all) != 0 {
		t.Errorf("failed ADD left allocations: %+v", all)
	}
	after := e.nodeLinks()
	for name := range after {
		if !before[name] && name != e.opts.Bridge {
			t.Errorf("failed ADD left link %s on the node", name)
		}
	}
	if after[bridge.HostVethName(rc.ContainerID, "eth0")] {
		t.Errorf("failed ADD left its veth")
	}
}
