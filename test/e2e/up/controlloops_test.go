package up

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/server"
)

// TestServerRestartsAStoppedComponent: `nodekit server` runs the scheduler and the controller manager
// as child processes; when one stops while the server runs (here the scheduler, made to return by
// server.FaultStopEnv, which cancels its loop's context: its Run returns as a loop stopping on its own
// does, and the child exits non-zero), the server logs it and starts it again, recording the restart
// in the component record its mirror pod reports, and keeps serving. The children start watching only
// once the API server is ready, so their logs hold no "forbidden" answer from before the RBAC bootstrap.
func TestServerRestartsAStoppedComponent(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	sc := server.Config{DataDir: filepath.Join(dir, "data"), APIServer: apiserver.Options{BindAddress: "127.0.0.1",
		AdvertiseAddress: "127.0.0.1", Port: freePort(t)},
		Etcd: etcd.Config{ClientAddr: "127.0.0.1:" + strconv.Itoa(freePort(t))}}
	cmd := exec.Command(filepath.Join(bin, "nodekit"), sc.Args()...)
	cmd.Env = append(os.Environ(), server.FaultStopEnv+"="+server.SchedulerLoop+"@10s")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	})
	restarted := `msg="component started" component=` + components.Scheduler + ` pid=`
	for {
		log := out.String()
		if strings.Contains(log, `msg="component exited; restarting it" component=`+components.Scheduler) &&
			strings.Count(log, restarted) >= 2 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("nodekit server exited (%v) instead of restarting its scheduler\n%s", err, tail(log, 40))
		case <-time.After(time.Second):
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("no scheduler restart 3m after start\n%s", tail(log, 40))
		}
	}
	recs, errs := components.Read(sc.Paths().Components)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := map[string]components.Record{}
	for _, r := range recs {
		got[r.Name] = r
	}
	for _, n := range []string{components.Etcd, components.APIServer, components.Scheduler, components.ControllerManager} {
		if _, ok := got[n]; !ok {
			t.Errorf("no component record of %s in %s: %+v", n, sc.Paths().Components, recs)
		}
	}
	if r := got[components.Scheduler]; r.Restarts < 1 || !r.Alive() || r.LogFile != sc.Paths().LogFile(components.Scheduler) {
		t.Errorf("scheduler record after its restart: %+v (alive %v), want restarts >= 1, alive, log file %s", r, r.Alive(), sc.Paths().LogFile(components.Scheduler))
	}
	if b, err := os.ReadFile(sc.Paths().LogFile(components.APIServer)); err != nil || !strings.Contains(string(b), `msg="apiserver configured"`) {
		t.Errorf("the server's own log file lacks its start line (%v)", err)
	}
	// The children wait for the API server's readiness (the RBAC bootstrap roles reconciled) before
	// they start watching: no "forbidden" answer at start, and one line saying they waited.
	for _, c := range []string{components.Scheduler, components.ControllerManager} {
		b, err := os.ReadFile(sc.Paths().LogFile(c))
		if err != nil {
			t.Fatal(err)
		}
		var forbidden []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "forbidden") {
				forbidden = append(forbidden, l)
			}
		}
		t.Logf("%s.log: %d lines, %d with \"forbidden\"", c, strings.Count(string(b), "\n"), len(forbidden))
		if len(forbidden) > 0 || !strings.Contains(string(b), `msg="API server ready; starting"`) {
			t.Errorf("%s.log: %d \"forbidden\" lines (want none), or no line saying it waited for the API server; first: %q", c, len(forbidden), append(forbidden, "")[0])
		}
	}
	t.Logf("scheduler stopped 10s after start and was restarted by the server; %v after start", time.Since(start).Round(time.Millisecond))
}
