package server

import (
	"bytes"
	"context"
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
			if err := copyProcessLog(context.Background(), f, &out, &tc.opts); err != nil {
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
	go func() { done <- copyProcessLog(ctx, f, pw, &logs.LogOptions{Follow: true}); pw.Close() }()
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
