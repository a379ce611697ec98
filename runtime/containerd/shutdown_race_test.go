package containerd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/containerd"
	ctrdtest "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestCleanupAfterStopInterruptedByShutdown replays an agent stopped mid-StopPodSandbox: once
// containerd has killed the sandbox's pause process and while it reaps it, the supervisor is stopped
// (as the agent's shutdown does: the CRI call is cancelled, containerd SIGTERMed), then a fresh
// supervisor on the same directories runs Cleanup (as `nodekit down --purge` does). containerd 1.6
// stopped in that window has deleted the sandbox's bundle but not shut its shim down, and once
// restarted cannot find the shim, though RemovePodSandbox succeeds. Cleanup must leave no shim of this
// containerd alive, no mount under its directories and no pod netns. The window is hit about 3 times
// in 4, so the test runs 3 rounds, each on a fresh containerd.
func TestCleanupAfterStopInterruptedByShutdown(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprintf("round%d", i), testCleanupAfterInterruptedStop)
	}
}

func testCleanupAfterInterruptedStop(t *testing.T) {
	rt := ctrdtest.Start(t, ctrdtest.Options{})
	sup := rt.Supervisor
	address := sup.Config().Address
	id, _ := rt.RunSandbox(t, rt.SandboxConfig("stop-race", ctrdtest.Namespace))
	netns := rt.SandboxNetNS(t, id)
	shims := containerd.Shims(address)
	if len(shims) != 1 {
		t.Fatalf("shims of %s after RunPodSandbox: %v, want exactly one", address, shims)
	}
	shim := shims[0]
	t.Cleanup(func() { killIfShim(shim, address) })
	pause := containerd.ChildPIDs(shim)
	if len(pause) != 1 {
		t.Fatalf("shim %d children %v, want the pause process alone", shim, pause)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() {
		_, err := rt.CRI.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		stopped <- err
	}()
	// The agent's shutdown lands once the pause process is dead, while containerd reaps the sandbox:
	// Supervisor.Stop closes the CRI client (cancelling the call) and SIGTERMs containerd.
	waitGone(t, pause[0], 30*time.Second)
	if err := sup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("StopPodSandbox interrupted: %v", <-stopped)

	again, err := containerd.New(context.Background(), sup.Config())
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	if err := again.Start(cctx); err != nil {
		t.Fatal(errors.Join(err, again.Stop(cctx)))
	}
	if err := again.Cleanup(cctx); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	if left := containerd.Shims(address); len(left) > 0 {
		t.Errorf("shims of %s alive after Cleanup: %v (the sandbox's was %d)", address, left, shim)
	}
	if alive(shim) {
		t.Errorf("sandbox shim %d (%s) alive after Cleanup", shim, cmdline(shim))
	}
	for _, dir := range []string{sup.Config().State, sup.Config().Root} {
		if m, err := containerd.MountsUnder(dir); err != nil || len(m) > 0 {
			t.Errorf("mounts under %s after Cleanup: %v %v", dir, m, err)
		}
	}
	if _, err := os.Stat(netns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod netns %s left after Cleanup (stat: %v)", netns, err)
	}
}

// alive reports whether pid exists and is not a zombie (PID 1 here does not reap orphans).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// waitGone waits until pid has exited (gone or a zombie), failing t after timeout.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); alive(pid); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
	}
}

// killIfShim SIGKILLs pid if it is still the shim of address this test started (its cmdline names it),
// so a failed run leaves nothing behind.
func killIfShim(pid int, address string) {
	if alive(pid) && strings.Contains(cmdline(pid), " -address "+address) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
