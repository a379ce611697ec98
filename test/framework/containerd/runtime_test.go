package containerd

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/images/bundled"
)

// TestRuntimeHelpers runs the demo image v1 and v2 through the helpers, then closes the runtime and
// checks Close left nothing: no containerd process, bridge, directory or mount.
func TestRuntimeHelpers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a real containerd needs root")
	}
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			r.Close()
		}
	})
	if len(r.Images) != len(bundled.All) || r.Bridge == "" || !strings.HasPrefix(r.Subnet, "10.213.") {
		t.Errorf("runtime: images %v bridge %q subnet %q", r.Images, r.Bridge, r.Subnet)
	}
	p1 := r.RunDemoPod(t, "one")
	p2 := r.RunPod(t, "two", bundled.DemoServerV2)
	if b := HTTPGet(t, "http://"+p1.IP+":8080/"); !strings.HasPrefix(b, "demo-server v1 pod=one ") {
		t.Errorf("pod one: %q", b)
	}
	if b := HTTPGet(t, "http://"+p2.IP+":8080/"); !strings.HasPrefix(b, "demo-server v2 pod=two ") {
		t.Errorf("pod two: %q", b)
	}
	if out, _, code := r.Exec(t, p2.ContainerID, "sh", "-c", "touch /tmp/readyz-fail"); code != 0 {
		t.Errorf("exec touch: exit %d %q", code, out)
	}
	if _, err := WaitHTTP("http://"+p2.IP+":8080/readyz", 0); err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("readyz after touching /tmp/readyz-fail: %v, want 503", err)
	}

	pid, bridge, dir := r.Supervisor.PID(), r.Bridge, r.Dir
	if _, err := netlink.LinkByName(bridge); err != nil {
		t.Fatalf("bridge %s: %v", bridge, err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("containerd pid %d alive after Close", pid)
	}
	if _, err := netlink.LinkByName(bridge); err == nil {
		t.Errorf("bridge %s left after Close", bridge)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s left after Close: %v", dir, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAfterStop: a test that stops containerd with a pod running still leaves nothing behind:
// Close brings containerd back on the same directories and removes the pod through it.
func TestCloseAfterStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a real containerd needs root")
	}
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := r.RunDemoPod(t, "orphan")
	netns := r.SandboxNetNS(t, pod.SandboxID)
	address := r.Address()
	if err := r.Supervisor.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processMentions(address) {
		t.Fatal("no shim alive after Stop: the test needs a running pod")
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if processMentions(address) {
		t.Errorf("a shim of %s survived Close", address)
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Errorf("pod netns %s survived Close: %v", netns, err)
	}
}
