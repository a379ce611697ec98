package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/cri"
)

// binary is the containerd under test: NODEKIT_CONTAINERD (e.g. a 2.x build) or containerd on PATH.
func binary() string {
	if b := os.Getenv("NODEKIT_CONTAINERD"); b != "" {
		return b
	}
	return "containerd"
}

func newManaged(t *testing.T) *Supervisor { return newManagedLog(t, nil) }

// newManagedLog is newManaged with the supervisor's events sent to logger (nil: slog.Default()).
func newManagedLog(t *testing.T, logger *slog.Logger) *Supervisor {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("managed containerd needs root")
	}
	dir, err := os.MkdirTemp("", "nk-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Config{Dir: dir, Binary: binary(), StopTimeout: 5 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		os.RemoveAll(dir)
	})
	return s
}

// TestSupervisorLifecycle starts a real containerd, checks its CRI endpoint, kills it behind the
// supervisor's back and expects a restart, then stops it and checks the process is gone.
func TestSupervisorLifecycle(t *testing.T) {
	ctx := context.Background()
	// The supervisor's events go to a file: slog serialises the writes, os.ReadFile reads them back.
	events := eventLog(t)
	s := newManagedLog(t, slog.New(slog.NewTextHandler(events, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// containerd's own output is in its log file, not in the supervisor's log stream.
	if want := s.Config().Dir + "/containerd.log"; s.LogPath() != want {
		t.Errorf("LogPath = %q, want %q", s.LogPath(), want)
	}
	if n := countInFile(t, s.LogPath(), `msg="starting containerd"`); n != 1 {
		t.Errorf("%s has %d \"starting containerd\" lines after Start, want 1", s.LogPath(), n)
	}
	if n := countInFile(t, events.Name(), "starting containerd"); n != 0 {
		t.Errorf("containerd's own lines were relayed to the supervisor's log (%d times)", n)
	}
	for _, want := range []string{"msg=\"containerd started\"", "log=" + s.LogPath(), "msg=\"containerd ready\""} {
		if countInFile(t, events.Name(), want) == 0 {
			t.Errorf("supervisor log %s lacks %q", events.Name(), want)
		}
	}
	c := s.Client()
	v, err := c.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "containerd" || !strings.Contains(v.RuntimeVersion, s.Version().String()) {
		t.Errorf("CRI Version = %s %s, want containerd %s", v.RuntimeName, v.RuntimeVersion, s.Version())
	}
	st, err := c.Runtime().Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.RuntimeReady && !cond.Status {
			t.Errorf("RuntimeReady is false: %s", cond.Message)
		}
	}
	drv, err := c.CgroupDriver(ctx)
	switch {
	case s.Version().Major >= 2:
		if err != nil || drv != s.Params().CgroupDriver {
			t.Errorf("CgroupDriver on containerd %s = %q, %v; want %q", s.Version(), drv, err, s.Params().CgroupDriver)
		}
	default:
		if !errors.Is(err, cri.ErrRuntimeConfigUnimplemented) {
			t.Errorf("CgroupDriver on containerd %s: %q, %v; want ErrRuntimeConfigUnimplemented", s.Version(), drv, err)
		}
	}
	cfg, err := os.ReadFile(s.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	has, _ := HasCapSysResource()
	if want := "restrict_oom_score_adj = " + map[bool]string{true: "false", false: "true"}[has]; !strings.Contains(string(cfg), want) {
		t.Errorf("config lacks %q (CAP_SYS_RESOURCE=%v)", want, has)
	}

	// Kill containerd behind the supervisor's back: it must come back with a new PID.
	pid := s.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if npid := s.PID(); npid != 0 && npid != pid {
			if _, err := c.Version(ctx); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd not restarted 30s after SIGKILL of pid %d", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The restart appends to the same file; the supervisor reports the exit with its status.
	if n := countInFile(t, s.LogPath(), `msg="starting containerd"`); n != 2 {
		t.Errorf("%s has %d \"starting containerd\" lines after a restart, want 2 (appended)", s.LogPath(), n)
	}
	if want := fmt.Sprintf("msg=\"containerd exited; restarting\" pid=%d err=\"signal: killed\"", pid); countInFile(t, events.Name(), want) != 1 {
		t.Errorf("supervisor log %s lacks %q", events.Name(), want)
	}

	pid = s.PID()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("containerd pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if s.Client() != nil || s.PID() != 0 {
		t.Errorf("after Stop: client %v, pid %d", s.Client(), s.PID())
	}
	_, err = cri.Dial(ctx, s.Endpoint(), cri.WithTimeout(2*time.Second))
	var ue *cri.UnreachableError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "runtime not reachable at "+s.Endpoint()+": ") {
		t.Errorf("Dial after Stop: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dir: "rel"}, `Dir "rel" must be an absolute path`},
		{Config{Dir: "/tmp/x", Binary: "/nonexistent/containerd"}, `Binary "/nonexistent/containerd"`},
		{Config{Dir: "/tmp/x", Binary: "/bin/false"}, "/bin/false --version"},
		{Config{Endpoint: "tcp://1.2.3.4:5"}, `scheme "tcp" is not supported`},
		{Config{Dir: "/tmp/" + strings.Repeat("x", 100), Binary: binary()}, "too long for a unix socket"},
	} {
		if _, err := New(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestExternalEndpoint connects to a running containerd through Config.Endpoint: Start only connects,
// Cleanup refuses, Stop leaves the runtime running.
func TestExternalEndpoint(t *testing.T) {
	ctx := context.Background()
	managed := newManaged(t)
	if err := managed.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ext, err := New(ctx, Config{Endpoint: managed.Endpoint(), StartTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ext.Managed() || ext.Endpoint() != managed.Endpoint() || ext.Address() != managed.Address() {
		t.Errorf("external: managed %v endpoint %q address %q", ext.Managed(), ext.Endpoint(), ext.Address())
	}
	if err := ext.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ext.Client().Version(ctx); err != nil {
		t.Error(err)
	}
	if err := ext.Cleanup(ctx); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("Cleanup on an external endpoint: %v", err)
	}
	if err := ext.Stop(ctx); err != nil {
		t.Error(err)
	}
	if _, err := managed.Client().Version(ctx); err != nil {
		t.Errorf("runtime down after the external supervisor stopped: %v", err)
	}

	// An endpoint nobody serves: Start gives up after StartTimeout with the unreachable error.
	down, err := New(ctx, Config{Endpoint: "unix:///nonexistent/nodekit.sock", StartTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Start(ctx); err == nil || !strings.Contains(err.Error(), "runtime not reachable at unix:///nonexistent/nodekit.sock") {
		t.Errorf("Start on a dead endpoint: %v", err)
	}
}

// TestStartFailure runs a stand-in binary that dies at start like a misconfigured containerd: Start
// must fail with its exit status and last error line, and Stop must still return.
func TestStartFailure(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/containerd"
	script := `#!/bin/sh
if [ "$1" = --version ]; then echo "containerd github.com/containerd/containerd v1.6.20 x"; exit 0; fi
echo 'time="2026-01-01T00:00:00Z" level=fatal msg="failed to load config" error="bad toml"' >&2
exit 3
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Config{Dir: dir, Binary: bin, CNIBinDirs: []string{dir}, RestrictOOMScoreAdj: new(bool), CgroupDriver: "cgroupfs"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "containerd exited during start (exit status 3): failed to load config: bad toml (log "+dir+"/containerd.log)") {
		t.Errorf("Start: %v", err)
	}
	if n := countInFile(t, s.LogPath(), `msg="failed to load config"`); n != 1 {
		t.Errorf("%s has %d copies of the fatal line, want 1", s.LogPath(), n)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
}

// TestPrepareFailure: a Dir that cannot be created fails Start with the reason, and Stop returns.
func TestPrepareFailure(t *testing.T) {
	file := t.TempDir() + "/file"
	os.WriteFile(file, nil, 0o644)
	s, err := New(context.Background(), Config{Dir: file + "/sub", Binary: binary(), CNIBinDirs: []string{"/"}, RestrictOOMScoreAdj: new(bool), CgroupDriver: "cgroupfs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Start under a file: %v", err)
	}
	done := make(chan error)
	go func() { done <- s.Stop(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop hangs after a failed Start")
	}
}

// countInFile counts the lines of path containing sub.
func countInFile(t *testing.T, path, sub string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// eventLog is a file in t.TempDir() for a test's slog output.
func eventLog(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(t.TempDir() + "/events.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
