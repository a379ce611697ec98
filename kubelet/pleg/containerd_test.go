package pleg

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestPLEGOnContainerd runs the PLEG against a real private containerd: it sees a container start and
// die, and it asks for container events at most once where the runtime lacks them (containerd < 1.7
// answers Unimplemented and logs one error per call in containerd.log), or follows them where it has
// them.
func TestPLEGOnContainerd(t *testing.T) {
	rt := containerd.Start(t, containerd.Options{})
	logFile, err := os.Create(t.TempDir() + "/pleg.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	p := New(rt.CRI.Runtime(), 100*time.Millisecond, slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})))
	p.reconnect = 50 * time.Millisecond // a PLEG that retried after Unimplemented would show many errors
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped }) // runs before the runtime's cleanup

	sb := rt.SandboxConfig("pleg", containerd.Namespace)
	uid := types.UID(sb.GetMetadata().GetUid())
	sbID, ip := rt.RunSandbox(t, sb)
	cfg := containerd.DemoContainerConfig("demo", "", sb, ip)
	cfg.Labels[kubelettypes.KubernetesPodUIDLabel] = string(uid)
	ctrID := rt.StartContainer(t, sbID, sb, cfg)
	waitFor(t, p, Event{PodUID: uid, Type: ContainerStarted, ID: ctrID})

	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if _, err := rt.CRI.Runtime().StopContainer(sctx, &runtimeapi.StopContainerRequest{ContainerId: ctrID, Timeout: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, Event{PodUID: uid, Type: ContainerDied, ID: ctrID})

	v := rt.Supervisor.Version()
	withEvents := v.Major > 1 || v.Minor >= 7
	containerdErrors := countLines(t, rt.Supervisor.LogPath(), "level=error", "GetContainerEvents")
	fallbacks := countLines(t, logFile.Name(), "does not implement CRI container events")
	if withEvents {
		if !p.Evented() || containerdErrors != 0 || fallbacks != 0 {
			t.Errorf("containerd %s has container events: Evented %v, %d GetContainerEvents errors in containerd.log, %d fallback lines; want true, 0, 0",
				v, p.Evented(), containerdErrors, fallbacks)
		}
		return
	}
	// Several relists later the stream was still asked for once: one error in containerd's log.
	if p.Evented() || containerdErrors != 1 || fallbacks != 1 {
		t.Errorf("containerd %s lacks container events: Evented %v, %d GetContainerEvents errors in %s, %d fallback lines; want false, 1, 1",
			v, p.Evented(), containerdErrors, rt.Supervisor.LogPath(), fallbacks)
	}
}

// waitFor reads p's events until want arrives (30 s at most).
func waitFor(t *testing.T, p *PLEG, want Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-p.Events():
			if e == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for container %s within 30s", want.Type, want.ID)
		}
	}
}

// countLines counts the lines of path that contain every one of subs.
func countLines(t *testing.T, path string, subs ...string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
lines:
	for _, line := range strings.Split(string(data), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		n++
	}
	return n
}
