package cni_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/cnitest"
)

// rawRun runs the built plugin on the node like a runtime that does not use libcni: env and stdin as
// given. It returns the CNI error result (nil on success).
func (e *env) rawRun(t *testing.T, env []string, stdin string) *types.Error {
	t.Helper()
	cmd := e.node.Command(context.Background(), filepath.Join(binDir, "nodekit-cni"))
	cmd.Env = append([]string{"CNI_PATH=" + binDir, "PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err == nil {
		return nil
	}
	te, derr := cnitest.DecodeError(out)
	if derr != nil {
		t.Fatalf("%v: stdout is not a CNI error result: %v: %q", env, derr, out)
	}
	return te
}

// TestHostileInvocations: bad environment (missing/nonexistent netns, long or empty CNI_IFNAME, bad
// container IDs, garbage CNI_ARGS), a network name that would escape the data dir, DEL of an unknown
// container and GC with garbage attachments: each is a CNI error result (or, for DEL, success) and
// nothing (veth, allocation, directory) is left.
func TestHostileInvocations(t *testing.T) {
	e := newEnv(t, nil, "10.244.9.0/24", "10.244.0.0/16")
	conf, err := os.ReadFile(e.opts.Path)
	if err != nil {
		t.Fatal(err)
	}
	// The single plugin's config as libcni would pass it (name and cniVersion injected).
	plugin := string(conf)
	if i := strings.Index(plugin, `"plugins"`); i >= 0 {
		plugin = string(e.rt.List.Plugins[0].Bytes)
		plugin = strings.Replace(plugin, "{", `{"name":"`+e.opts.NetworkName+`","cniVersion":"1.1.0",`, 1)
	}
	pn, err := e.lab.NewPodNS()
	if err != nil {
		t.Fatal(err)
	}
	before := e.nodeLinks()
	id := "ctr-bad-" + suffix()
	for _, tc := range []struct {
		name string
		env  []string
		conf string
		code uint
	}{
		{"missing CNI_NETNS", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0"}, plugin, types.ErrInvalidEnvironmentVariables},
		{"nonexistent netns", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0", "CNI_NETNS=/var/run/netns/nope-" + suffix()}, plugin, types.ErrInvalidNetNS},
		{"netns is a regular file", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0", "CNI_NETNS=" + e.opts.Path}, plugin, types.ErrInvalidNetNS},
		{"ifname too long", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0123456789abcd", "CNI_NETNS=" + pn.Path()}, plugin, types.ErrInvalidEnvironmentVariables},
		{"ifname with slash", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=a/b", "CNI_NETNS=" + pn.Path()}, plugin, types.ErrInvalidEnvironmentVariables},
		{"container ID with slash", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=../../x", "CNI_IFNAME=eth0", "CNI_NETNS=" + pn.Path()}, plugin, types.ErrInvalidEnvironmentVariables},
		{"no container ID", []string{"CNI_COMMAND=DEL", "CNI_IFNAME=eth0"}, plugin, types.ErrInvalidEnvironmentVariables},
		{"network name escapes the data dir", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0", "CNI_NETNS=" + pn.Path()},
			strings.Replace(plugin, `"name":"`+e.opts.NetworkName+`"`, `"name":"../../escape"`, 1), types.ErrInvalidNetworkConfig},
		{"unknown command", []string{"CNI_COMMAND=EXPLODE", "CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0", "CNI_NETNS=" + pn.Path()}, plugin, types.ErrInvalidEnvironmentVariables},
		{"GC with garbage attachments", []string{"CNI_COMMAND=GC"}, strings.Replace(plugin, "{", `{"cni.dev/valid-attachments":"garbage",`, 1), types.ErrDecodingFailure},
	} {
		te := e.rawRun(t, tc.env, tc.conf)
		if te == nil {
			t.Errorf("%s: succeeded", tc.name)
			continue
		}
		if te.Code != tc.code || te.Msg == "" {
			t.Errorf("%s: code %d %q (%s), want code %d", tc.name, te.Code, te.Msg, te.Details, tc.code)
		}
	}
	// Garbage CNI_ARGS are not ours to interpret (no plugin-specific args): ADD works, DEL cleans.
	env := []string{"CNI_CONTAINERID=" + id, "CNI_IFNAME=eth0", "CNI_NETNS=" + pn.Path(), "CNI_ARGS=;;=garbage;K8S_POD_NAME"}
	if te := e.rawRun(t, append([]string{"CNI_COMMAND=ADD"}, env...), plugin); te != nil {
		t.Errorf("ADD with garbage CNI_ARGS: %v", te)
	}
	if te := e.rawRun(t, append([]string{"CNI_COMMAND=DEL"}, env...), plugin); te != nil {
		t.Errorf("DEL: %v", te)
	}
	// DEL of a container never added succeeds and does nothing.
	if te := e.rawRun(t, []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=never-" + suffix(), "CNI_IFNAME=eth0"}, plugin); te != nil {
		t.Errorf("DEL of an unknown container: %v", te)
	}
	if _, err := os.Stat(filepath.Join(e.opts.DataDir, "..", "..", "escape")); err == nil {
		t.Errorf("network name ../../escape created a directory outside the data dir")
		os.RemoveAll(filepath.Join(e.opts.DataDir, "..", "..", "escape"))
	}
	if all, _ := e.store().List(); len(all) != 0 {
		t.Errorf("hostile invocations left allocations: %+v", all)
	}
	for name := range e.nodeLinks() {
		if !before[name] && name != e.opts.Bridge {
			t.Errorf("hostile invocations left link %s", name)
		}
	}
}

// TestRepeatedAddAndRacingDel: a second ADD of the same attachment keeps one IP and one veth; ADD and DEL
// of one container racing (a runtime bug the spec forbids, but it happens) end either fully attached or
// with nothing left, never with a veth or an IP without the other.
func TestRepeatedAddAndRacingDel(t *testing.T) {
	e := newEnv(t, nil, "10.244.10.0/24", "10.244.0.0/16")
	p := e.add(nil)
	if err := e.node.Do(func() error { _, err := e.rt.Add(ctx(t), p.rc); return err }); err != nil {
		t.Errorf("second ADD of %s: %v", p.rc.ContainerID, err)
	}
	if err := e.check(p); err != nil {
		t.Errorf("CHECK after a repeated ADD: %v", err)
	}
	all, _ := e.store().List()
	if len(all) != 1 {
		t.Errorf("after a repeated ADD the store holds %d allocations, want 1", len(all))
	}
	if !e.nodeLinks()[bridge.HostVethName(p.rc.ContainerID, "eth0")] {
		t.Errorf("repeated ADD removed the pod's veth")
	}
	if err := e.del(p); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		q, err := e.lab.NewPodNS()
		if err != nil {
			t.Fatal(err)
		}
		rc := cnitest.Attachment("ctr-race-"+suffix(), q.Path(), "eth0", nil)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = e.node.Do(func() error { _, err := e.rt.Add(ctx(t), rc); return err })
		}()
		go func() {
			defer wg.Done()
			_ = e.node.Do(func() error { return e.rt.Del(ctx(t), rc) })
		}()
		wg.Wait()
		_, allocated, _ := e.store().Lookup(rc.ContainerID, "eth0")
		veth := e.nodeLinks()[bridge.HostVethName(rc.ContainerID, "eth0")]
		if allocated != veth {
			t.Errorf("race %d: allocated=%v veth=%v, want both or neither", i, allocated, veth)
		}
		if err := e.node.Do(func() error { return e.rt.Del(context.Background(), rc) }); err != nil {
			t.Errorf("race %d: final DEL: %v", i, err)
		}
		_ = e.lab.RemovePodNS(q)
	}
	if all, _ := e.store().List(); len(all) != 0 {
		t.Errorf("left allocations: %+v", all)
	}
}
