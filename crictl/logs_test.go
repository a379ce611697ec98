package crictl

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const sampleLog = `2026-01-02T10:00:00.000000001Z stdout F line one
2026-01-02T10:00:01.000000000Z stderr F oops
2026-01-02T10:00:02.000000000Z stdout P part-
2026-01-02T10:00:02.100000000Z stdout F ial
2026-01-02T10:00:03.000000000Z stdout F line four
`

// logContainer is the full ID of the container whose log the tests read.
var logContainer = strings.Repeat("c1", 32)

// logRuntime serves one container whose log file is path.
func logRuntime(path string, state runtimeapi.ContainerState) *fakeRuntime {
	return &fakeRuntime{
		ctrs: []*runtimeapi.Container{{Id: logContainer, State: state, Metadata: &runtimeapi.ContainerMetadata{Name: "srv"}}},
		status: map[string]*runtimeapi.ContainerStatus{logContainer: {
			Id: logContainer, State: state, LogPath: path, Metadata: &runtimeapi.ContainerMetadata{Name: "srv"},
		}},
	}
}

// readAll runs the logs verb for the container of log file path with options o.
func readAll(t *testing.T, path string, o logsOptions) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o.prefix = logContainer[:6]
	cl := criClient{rt: logRuntime(path, runtimeapi.ContainerState_CONTAINER_EXITED)}
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String()
}

func TestLogs(t *testing.T) {
	p := writeFile(t, "0.log", sampleLog)
	all := logsOptions{tail: -1, limitBytes: -1}
	out, errOut := readAll(t, p, all)
	if out != "line one\npart-ial\nline four\n" || errOut != "oops\n" {
		t.Errorf("all: stdout %q stderr %q", out, errOut)
	}
	// --tail counts lines of the file, a partial entry being one, as the kubelet and upstream crictl do.
	tail := all
	tail.tail = 2
	out, errOut = readAll(t, p, tail)
	if out != "ial\nline four\n" || errOut != "" {
		t.Errorf("--tail 2: stdout %q stderr %q", out, errOut)
	}
	// Timestamps have upstream's fixed width (RFC3339NanoFixed).
	ts := all
	ts.tail, ts.timestamps = 1, true
	out, _ = readAll(t, p, ts)
	if out != "2026-01-02T10:00:03.000000000Z line four\n" {
		t.Errorf("--timestamps: %q", out)
	}
	since := all
	since.since = "2026-01-02T10:00:01Z"
	out, errOut = readAll(t, p, since)
	if out != "part-ial\nline four\n" || errOut != "oops\n" {
		t.Errorf("--since: stdout %q stderr %q", out, errOut)
	}
	stream := all
	stream.stream = "stderr"
	out, errOut = readAll(t, p, stream)
	if out != "" || errOut != "oops\n" {
		t.Errorf("--stream stderr: stdout %q stderr %q", out, errOut)
	}
	// The byte limit counts both streams together.
	limit := all
	limit.limitBytes = 12
	out, errOut = readAll(t, p, limit)
	if out != "line one\n" || errOut != "oop" {
		t.Errorf("--limit-bytes 12: stdout %q stderr %q", out, errOut)
	}
	if _, err := parseSince("yesterday", time.Now()); err == nil {
		t.Error("parseSince(yesterday): want an error")
	}
	now := time.Now()
	if got, _ := parseSince("42m", now); !got.Equal(now.Add(-42 * time.Minute)) {
		t.Errorf("parseSince(42m) = %v", got)
	}
	if got := previousLogPath("/var/log/pods/x/srv/2.log", 2); got != "/var/log/pods/x/srv/1.log" {
		t.Errorf("previousLogPath = %q", got)
	}
	var b bytes.Buffer
	s := streams{out: &b, errOut: &b}
	bad := writeFile(t, "bad.log", "not a cri log line\n")
	o := all
	o.prefix = logContainer
	if err := o.run(context.Background(), criClient{rt: logRuntime(bad, runtimeapi.ContainerState_CONTAINER_EXITED)}, s); err == nil {
		t.Error("malformed log: want an error")
	}
	o.stream = "both"
	if err := o.run(context.Background(), criClient{rt: logRuntime(p, runtimeapi.ContainerState_CONTAINER_EXITED)}, s); err == nil || !strings.Contains(err.Error(), `--stream "both"`) {
		t.Errorf("--stream both: %v, want an error naming the flag", err)
	}
	o.stream, o.previous = "", true
	if err := o.run(context.Background(), criClient{rt: logRuntime(p, runtimeapi.ContainerState_CONTAINER_EXITED)}, s); err == nil || err.Error() != "previous terminated container srv not found" {
		t.Errorf("--previous of attempt 0: %v", err)
	}
}

// TestFollowLogs appends to a log while following it, including a line written in two pieces, and
// checks that following stops once the container no longer runs.
func TestFollowLogs(t *testing.T) {
	p := writeFile(t, "0.log", "2026-01-02T10:00:00Z stdout F first\n")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rt := logRuntime(p, runtimeapi.ContainerState_CONTAINER_RUNNING)
	var out syncBuffer
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		o := logsOptions{prefix: logContainer, follow: true, tail: -1, limitBytes: -1}
		done <- o.run(ctx, criClient{rt: rt}, streams{out: &out, errOut: &out})
	}()
	waitFor(t, func() bool { return out.String() == "first\n" })
	f.WriteString("2026-01-02T10:00:01Z stdout F sec")
	time.Sleep(300 * time.Millisecond) // the reader sees the half-written line first
	f.WriteString("ond\n")
	waitFor(t, func() bool { return out.String() == "first\nsecond\n" })
	rt.setState(logContainer, runtimeapi.ContainerState_CONTAINER_EXITED)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not stop after the container stopped")
	}
	if ctx.Err() != nil {
		t.Fatal("follow ended by the deadline, not by the container stopping")
	}
}

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

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10s")
}
