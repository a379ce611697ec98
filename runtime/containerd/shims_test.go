package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAs starts /bin/sh (running "sleep 60; :", so it keeps a child) with the command line args
// (args[0] as its name) and kills it on cleanup.
func startAs(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	argv := append([]string{args[0], "-c", "sleep 60; :"}, args[1:]...)
	cmd := &exec.Cmd{Path: "/bin/sh", Args: argv}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() {
		for _, c := range childPIDs(cmd.Process.Pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
	})
	// Wait until the shell has forked its sleep.
	for deadline := time.Now().Add(5 * time.Second); len(childPIDs(cmd.Process.Pid)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v: no child after 5s", args)
		}
	}
	return cmd
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestKillShimsOnlyItsOwn: Shims and killShims pick exactly the processes named containerd-shim* whose
// -address is the given socket (and the shim's children), never containerd itself, a shim of another
// socket, or one whose socket merely starts with the same path.
func TestKillShimsOnlyItsOwn(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "containerd.sock")
	own := startAs(t, "/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", addr)
	ownChild := childPIDs(own.Process.Pid)
	others := []*exec.Cmd{
		startAs(t, "containerd", "--address", addr),
		startAs(t, "containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", addr+"2"),
		startAs(t, "sleeper", "-address", addr),
	}
	if got := Shims(addr); !slices.Equal(got, []int{own.Process.Pid}) {
		t.Fatalf("Shims(%s) = %v, want [%d]", addr, got, own.Process.Pid)
	}
	killed, err := killShims(addr, 5*time.Second)
	if err != nil || !slices.Equal(killed, []int{own.Process.Pid}) {
		t.Fatalf("killShims = %v, %v; want [%d]", killed, err, own.Process.Pid)
	}
	for _, pid := range append([]int{own.Process.Pid}, ownChild...) {
		for deadline := time.Now().Add(5 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d (the shim or its child) still running after killShims", pid)
			}
		}
	}
	for _, c := range others {
		if !running(c.Process.Pid) {
			t.Errorf("killShims killed %v (pid %d), not a shim of %s", c.Args, c.Process.Pid, addr)
		}
	}
	if got := Shims(addr); len(got) != 0 {
		t.Errorf("Shims after killShims: %v", got)
	}
}
