package up

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/server"
)

// TestServerExitsWhenAControlLoopStops: when the scheduler or the controller manager stops while
// `nodekit server` runs (here made to return by server.FaultStopEnv, which cancels that loop's
// context: its Run returns as a loop stopping on its own does), the server logs which one stopped,
// shuts down and exits non-zero, so its supervisor restarts it.
func TestServerExitsWhenAControlLoopStops(t *testing.T) {
	bin := binaries(t)
	for _, loop := range []string{server.SchedulerLoop, server.ControllerManagerLoop} {
		t.Run(loop, func(t *testing.T) {
			dir := t.TempDir()
			sc := server.Config{DataDir: filepath.Join(dir, "data"), APIServer: apiserver.Options{BindAddress: "127.0.0.1",
				AdvertiseAddress: "127.0.0.1", Port: freePort(t)},
				Etcd: etcd.Config{ClientAddr: "127.0.0.1:" + strconv.Itoa(freePort(t))}}
			cmd := exec.Command(filepath.Join(bin, "nodekit"), sc.Args()...)
			// 15 s: past the API server's start-up (a server shut down before its post-start hooks finished
			// exits through k8s.io/apiserver's fatal hook error instead).
			cmd.Env = append(os.Environ(), server.FaultStopEnv+"="+loop+"@15s")
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			cmd.WaitDelay = 10 * time.Second
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			var err error
			select {
			case err = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatalf("nodekit server still runs 3m after its %s was stopped\n%s", loop, tail(out.String(), 40))
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("nodekit server exited with %v, want a non-zero status\n%s", err, tail(out.String(), 40))
			}
			log := out.String()
			for _, want := range []string{
				`msg="control loop stopped; shutting the server down so that its supervisor restarts it" err="` + loop + ` stopped: `,
			} {
				if !strings.Contains(log, want) {
					t.Errorf("server log lacks %s\n%s", want, tail(log, 40))
				}
			}
			t.Logf("%s stopped 15s after start; nodekit server exited with status %d %v after start", loop, exit.ExitCode(), time.Since(start).Round(time.Millisecond))
		})
	}
}
