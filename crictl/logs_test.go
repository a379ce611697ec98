package crictl

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

const sampleLog = `2026-01-02T10:00:00.000000001Z stdout F line one
2026-01-02T10:00:01.000000000Z stderr F oops
2026-01-02T10:00:02.000000000Z stdout P part-
2026-01-02T10:00:02.100000000Z stdout F ial
2026-01-02T10:00:03.000000000Z stdout F line four
`

func readAll(t *testing.T, path string, opts logOptions) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := readLogs(context.Background(), path, &opts, &out, &errOut, func() bool { return false }); err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String()
}

func TestReadLogs(t *testing.T) {
	p := writeFile(t, "0.log", sampleLog)
	out, errOut := readAll(t, p, logOptions{tail: -1, limitBytes: -1})
	if out != "line one\npart-ial\nline four\n" || errOut != "oops\n" {
		t.Errorf("all: stdout %q stderr %q", out, errOut)
	}
	out, errOut = readAll(t, p, logOptions{tail: 2, limitBytes: -1})
	if out != "part-ial\nline four\n" || errOut != "" {
		t.Errorf("--tail 2: stdout %q stderr %q", out, errOut)
	}
	out, _ = readAll(t, p, logOptions{tail: 1, limitBytes: -1, timestamps: true})
	if out != "2026-01-02T10:00:03Z line four\n" {
		t.Errorf("--timestamps: %q", out)
	}
	since, _ := time.Parse(time.RFC3339, "2026-01-02T10:00:01Z")
	out, errOut = readAll(t, p, logOptions{tail: -1, limitBytes: -1, since: since})
	if out != "part-ial\nline four\n" || errOut != "oops\n" {
		t.Errorf("--since: stdout %q stderr %q", out, errOut)
	}
	out, errOut = readAll(t, p, logOptions{tail: -1, limitBytes: -1, stream: "stderr"})
	if out != "" || errOut != "oops\n" {
		t.Errorf("--stream stderr: stdout %q stderr %q", out, errOut)
	}
	// The byte limit counts both streams together.
	out, errOut = readAll(t, p, logOptions{tail: -1, limitBytes: 12})
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
	bad := writeFile(t, "bad.log", "not a cri log line\n")
	var b bytes.Buffer
	if err := readLogs(context.Background(), bad, &logOptions{tail: -1, limitBytes: -1}, &b, &b, nil); err == nil {
		t.Error("malformed log: want an error")
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
	running := make(chan bool, 1)
	running <- true
	isRunning := func() bool {
		select {
		case r := <-running:
			running <- r
			return r
		default:
			return false
		}
	}
	var out syncBuffer
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		done <- readLogs(ctx, p, &logOptions{follow: true, tail: -1, limitBytes: -1}, &out, &out, isRunning)
	}()
	waitFor(t, func() bool { return out.String() == "first\n" })
	f.WriteString("2026-01-02T10:00:01Z stdout F sec")
	time.Sleep(300 * time.Millisecond)
	f.WriteString("ond\n")
	waitFor(t, func() bool { return out.String() == "first\nsecond\n" })
	<-running
	running <- false
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
