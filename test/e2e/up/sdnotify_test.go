package up

import (
	"context"
	"net"
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
	"github.com/nodekit/nodekit/server"
)

// TestServerNotifiesSystemd runs `nodekit server` the way a Type=notify unit does (NOTIFY_SOCKET naming a
// unixgram socket, here the test's) and asserts the sd_notify protocol: READY=1 arrives only once the API
// server answers /readyz with "ok", and STOPPING=1 arrives after SIGTERM, before a clean exit.
func TestServerNotifiesSystemd(t *testing.T) {
	bin := binaries(t)
	dir, err := os.MkdirTemp("", "nknotify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()

	dataDir := filepath.Join(dir, "data")
	sc := server.Config{DataDir: dataDir, APIServer: apiserver.Options{BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1",
		Port: freePort(t)}, Etcd: etcd.Config{ClientAddr: "127.0.0.1:" + strconv.Itoa(freePort(t))}}
	cmd := exec.Command(filepath.Join(bin, "nodekit"), sc.Args()...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})

	var got []string
	expect := func(want string, timeout time.Duration) {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("notify socket closed before %q", want)
				}
				t.Logf("sd_notify message: %q", m)
				got = append(got, m)
				if strings.Contains(m, want) {
					return
				}
			case <-done:
				t.Fatalf("nodekit server exited (%v) before sending %q\n%s", exitErr, want, tail(stderr.String(), 40))
			case <-deadline:
				t.Fatalf("no %q on NOTIFY_SOCKET within %s\n%s", want, timeout, tail(stderr.String(), 40))
			}
		}
	}
	expect("READY=1", 3*time.Minute)
	// READY=1 means serving: /readyz answers "ok" right now.
	client := (&env{dataDir: dataDir}).client(t)
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
	if err != nil || string(body) != "ok" {
		t.Fatalf("after READY=1, /readyz = %q, %v; want \"ok\"\n%s", body, err, tail(stderr.String(), 40))
	}
	// The in-process control loops are among the checks.
	for _, check := range []string{server.SchedulerLoop, server.ControllerManagerLoop} {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz/" + check).DoRaw(context.Background())
		if err != nil || string(body) != "ok" {
			t.Errorf("/readyz/%s = %q, %v; want \"ok\"", check, body, err)
		}
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	expect("STOPPING=1", time.Minute)
	select {
	case <-done:
		if exitErr != nil {
			t.Errorf("nodekit server after SIGTERM: %v\n%s", exitErr, tail(stderr.String(), 40))
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("nodekit server still runs 2m after SIGTERM\n%s", tail(stderr.String(), 40))
	}
	// Exactly one READY=1 then STOPPING=1: nothing (GenericAPIServer, a child) announced readiness early.
	for drained := false; !drained; {
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-time.After(time.Second):
			drained = true
		}
	}
	if strings.Join(got, "") != "READY=1\nSTOPPING=1\n" {
		t.Errorf("sd_notify messages %q, want exactly [READY=1 STOPPING=1]", got)
	}
}
