package crictl_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/crictl"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/images/registry"
	"github.com/nodekit/nodekit/runtime/containerd"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a polling reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// background runs a long-lived crictl command (port-forward, attach, events) until stop is called; stop
// returns its error.
func background(t *testing.T, ep string, args ...string) (out *syncBuffer, stop func() error) {
	t.Helper()
	out = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- crictl.Run(ctx, append([]string{"-r", ep, "-t", "60s"}, args...), strings.NewReader(""), out, out)
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("crictl %v did not stop within 30s of cancellation", args)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

func waitOutput(t *testing.T, out *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
	}
	t.Fatalf("output never matched %s:\n%s", re, out.String())
	return nil
}

// TestStreamingAndMore covers port-forward and attach through the runtime's streaming server, update,
// statsp, events and pull from a loopback registry.
func TestStreamingAndMore(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	pod := rt.RunDemoPod(t, "stream-"+suffix())

	t.Run("port-forward", func(t *testing.T) {
		out, stop := background(t, c.ep, "port-forward", "--address", "127.0.0.1", pod.SandboxID[:8], ":8080")
		m := waitOutput(t, out, regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`))
		body := fw.HTTPGet(t, "http://127.0.0.1:"+m[1]+"/")
		if !strings.Contains(body, pod.Name) {
			t.Errorf("GET through port-forward = %q, want the pod name %s", body, pod.Name)
		}
		if err := stop(); err != nil {
			t.Errorf("port-forward ended with %v", err)
		}
	})

	t.Run("attach", func(t *testing.T) {
		out, stop := background(t, c.ep, "attach", pod.ContainerID[:8])
		// The demo server logs control changes to stdout, which attach streams.
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "control: readyz ok=true") && time.Now().Before(deadline) {
			resp, err := http.Post("http://"+pod.IP+":8080/control/readyz?ok=true", "text/plain", nil)
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(300 * time.Millisecond)
		}
		if !strings.Contains(out.String(), "control: readyz ok=true") {
			t.Errorf("attach output lacks the container's log line:\n%s", out.String())
		}
		if err := stop(); err != nil {
			t.Errorf("attach ended with %v", err)
		}
	})

	t.Run("update", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		const limit = "134217728"
		if got := strings.TrimSpace(c.must("update", "--memory", limit, pod.ContainerID[:8])); got != pod.ContainerID {
			t.Errorf("update printed %q", got)
		}
		got := strings.TrimSpace(c.must("exec", "-s", pod.ContainerID, "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
		if got != limit {
			t.Errorf("container memory limit after update = %q, want %s", got, limit)
		}
	})

	t.Run("statsp", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		// Pod stats need the sandbox's cgroup, which the runtime knows only from cgroup_parent (the
		// kubelet always sets one): run a pod under a cgroup parent of this test's own.
		parent := "/nkcrictl-" + suffix()
		t.Cleanup(func() { removeCgroup(t, parent) })
		name := "stats-" + suffix()
		podFile := writeFile(t, t.TempDir(), "pod.yaml", "metadata: {name: "+name+", namespace: crictl-e2e}\nlinux: {cgroup_parent: "+parent+"}\n")
		podID := strings.TrimSpace(c.must("runp", podFile))
		t.Cleanup(func() { c.run("rmp", "-f", podID) })
		out := c.must("statsp", "-s", "1", podID[:9])
		header, rows := tableRows(t, out)
		if strings.Join(header, "|") != "POD|POD ID|CPU %|MEM" || findRow(rows, 1, podID[:13]) == nil || findRow(rows, 0, name) == nil {
			t.Errorf("statsp:\n%s", out)
		}
		c.must("rmp", "-f", podID)
	})

	t.Run("events", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		out, stop := background(t, c.ep, "events", "-o", "go-template", "--template", "{{.containerEventType}} {{.containerId}}")
		time.Sleep(time.Second) // let the stream subscribe, or fail
		if rt.Supervisor.Version().Major == 1 && rt.Supervisor.Version().Minor < 7 {
			// containerd 1.6 has no GetContainerEvents: the command ends with a clear message.
			err := stop()
			if err == nil || !strings.Contains(err.Error(), "the runtime does not support container events") {
				t.Errorf("events on containerd %s: %v (output %q)", rt.Supervisor.Version(), err, out.String())
			}
			t.Logf("events on containerd %s: %v", rt.Supervisor.Version(), err)
			return
		}
		id := rt.StartContainer(t, pod.SandboxID, pod.Sandbox, fw.DemoContainerConfig("ev", "", pod.Sandbox, pod.IP, "--port", "8081"))
		waitOutput(t, out, regexp.MustCompile(`CONTAINER_STARTED_EVENT `+id))
		if err := stop(); err != nil {
			t.Errorf("events ended with %v", err)
		}
	})

	t.Run("pull", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		reg, err := registry.Start(context.Background(), "127.0.0.1:0", fw.ImagesDir(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		if err := containerd.WriteRegistryHost(rt.Supervisor.RegistryConfigPath(), reg.Addr); err != nil {
			t.Fatal(err)
		}
		ref := reg.Ref(bundled.DemoServerV2)
		// With stderr on a terminal, pull shows its progress (elapsed time; CRI reports no bytes).
		stdout, termShows := c.runStderrTTY("pull", ref)
		if !regexp.MustCompile(`^Image is up to date for sha256:[0-9a-f]{64}\n$`).MatchString(stdout) {
			t.Errorf("pull printed %q", stdout)
		}
		if ok, term := termShows(regexp.MustCompile(`Pulling ` + regexp.QuoteMeta(ref) + ` … done in [0-9.]+s`)); !ok {
			t.Errorf("pull showed no progress on the terminal: %q", term)
		}
		if got := c.must("images", "-q", ref); !strings.HasPrefix(got, "sha256:") {
			t.Errorf("pulled image not listed: %q", got)
		}
		missing := reg.Ref("nodekit.local/demo-server:v9")
		c.mustFail([]string{"pull", missing}, "pulling image "+missing, "not found")
	})
}

// removeCgroup removes the cgroup v1 directories of path under every mounted controller (the runtime
// removes the sandbox's own cgroup; the parent a test chose is the test's to remove).
func removeCgroup(t *testing.T, path string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			t.Errorf("removing cgroup %s: %v", d, err)
		}
	}
}
