package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/cri-client/pkg/logs"
)

func TestCopyProcessLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kube-apiserver.log")
	content := "time=2026-12-01T10:00:00.000Z level=INFO msg=one\n" +
		"time=2026-12-01T10:00:05.500Z level=INFO msg=two\n" +
		"not a log line\n" +
		"time=2026-12-01T10:00:09.000Z level=WARN msg=three" // unterminated
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name string
		opts logs.LogOptions
		want string
	}{
		{"all", logs.LogOptions{}, content},
		{"tail 2", logs.LogOptions{TailLines: n(2)}, "not a log line\ntime=2026-12-01T10:00:09.000Z level=WARN msg=three"},
		{"tail 0", logs.LogOptions{TailLines: n(0)}, ""},
		{"limit", logs.LogOptions{LimitBytes: n(60)}, content[:60]},
		{"since", logs.LogOptions{Since: time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)},
			"time=2026-12-01T10:00:05.500Z level=INFO msg=two\ntime=2026-12-01T10:00:09.000Z level=WARN msg=three"},
		{"timestamps", logs.LogOptions{TailLines: n(1), Timestamp: true},
			"2026-12-01T10:00:09Z time=2026-12-01T10:00:09.000Z level=WARN msg=three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var out bytes.Buffer
			if err := copyProcessLog(context.Background(), f, p, &out, &tc.opts); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q\nwant %q", out.String(), tc.want)
			}
		})
	}
}

func TestCopyProcessLogFollows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kube-scheduler.log")
	os.WriteFile(p, []byte("first\n"), 0o600)
	f, _ := os.Open(p)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- copyProcessLog(ctx, f, p, pw, &logs.LogOptions{Follow: true}); pw.Close() }()
	buf := make([]byte, 64)
	if n, _ := pr.Read(buf); string(buf[:n]) != "first\n" {
		t.Fatalf("first read %q", buf[:n])
	}
	w, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	w.WriteString("second\n")
	w.Close()
	if n, _ := pr.Read(buf); string(buf[:n]) != "second\n" {
		t.Fatalf("followed read %q", buf[:n])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCopyProcessLogFollowsRotation: a followed log file renamed away (rotated) and replaced by a new
// one at its path: the lines written to the old file up to the rename are all read, then the new
// file's from its start.
func TestCopyProcessLogFollowsRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kube-scheduler.log")
	if err := os.WriteFile(p, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- copyProcessLog(ctx, f, p, pw, &logs.LogOptions{Follow: true}); pw.Close() }()
	got := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case l := <-got:
			if l != want {
				t.Fatalf("read %q, want %q", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q within 10s", want)
		}
	}
	next("first")
	// The writer's last line to the old file, the rename and the new file, as lumberjack rotates;
	// several rotations in a row.
	for i, lines := range [][2]string{{"last-of-first", "new-1"}, {"last-of-second", "new-2"}} {
		w, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(lines[0] + "\n"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if err := os.Rename(p, fmt.Sprintf("%s.%d", p, i)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(lines[1]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		next(lines[0])
		next(lines[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
