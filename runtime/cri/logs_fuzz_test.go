package cri

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// exited answers ContainerStatus with an exited container, so a following read ends once the file is
// drained.
type exited struct{}

func (exited) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED}}, nil
}

// FuzzReadLogs feeds an arbitrary container log file (what a container writes ends up in it, through the
// runtime's CRI log format) and options to ReadLogs, which the kubelet server's /containerLogs and
// `nodekit crictl logs` serve. Properties: it never panics nor hangs; when the file is one well-formed CRI
// line per message (the fuzzed msg split on newlines), stdout carries exactly the messages, a partial
// ("P") line continuing into the next, and a tail of n lines and a byte limit are honoured.
func FuzzReadLogs(f *testing.F) {
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stdout F hello\n"), "a\nb", int64(-1), int64(-1), false)
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stderr P part\n2016-10-06T00:17:09.669794203Z stderr F ial\n"), "x", int64(1), int64(3), true)
	f.Add([]byte(`{"log":"docker json\n","stream":"stdout","time":"2016-10-06T00:17:09.669794202Z"}`+"\n"), "", int64(0), int64(0), false)
	f.Add([]byte("garbage\n\n\x00 stdout F\n2016 stdout X y\n"), "\x00\r", int64(5), int64(-1), true)
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stdout F"), "long line "+strings.Repeat("z", 5000), int64(2), int64(100), false)
	f.Fuzz(func(t *testing.T, file []byte, msg string, tail, limit int64, timestamps bool) {
		dir := t.TempDir()
		opts := func() *logs.LogOptions {
			o := &logs.LogOptions{}
			if tail >= 0 {
				o.TailLines = &tail
			}
			if limit > 0 {
				o.LimitBytes = &limit
			}
			o.Timestamp = timestamps
			return o
		}
		raw := filepath.Join(dir, "raw.log")
		if err := os.WriteFile(raw, file, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		_ = ReadLogs(ctx, raw, "c", opts(), exited{}, &out, &errOut)
		if ctx.Err() != nil {
			t.Fatal("ReadLogs of a finished file did not return within 10 s")
		}

		// A well-formed file: each line of msg a full line, every other one split in two partial lines
		// unless a tail is asked for (the tail counts the file's lines, partial ones included, as the
		// kubelet's does).
		var b strings.Builder
		var want []string
		ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for i, m := range strings.Split(msg, "\n") {
			when := ts.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
			if tail < 0 && i%2 == 1 && len(m) > 1 {
				b.WriteString(when + " stdout P " + m[:len(m)/2] + "\n")
				b.WriteString(when + " stdout F " + m[len(m)/2:] + "\n")
			} else {
				b.WriteString(when + " stdout F " + m + "\n")
			}
			want = append(want, m+"\n")
		}
		good := filepath.Join(dir, "good.log")
		if err := os.WriteFile(good, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		o := opts()
		o.Timestamp = false
		out.Reset()
		errOut.Reset()
		if err := ReadLogs(ctx, good, "c", o, exited{}, &out, &errOut); err != nil {
			t.Fatalf("ReadLogs of a well-formed file: %v", err)
		}
		if o.TailLines != nil && int(*o.TailLines) < len(want) {
			want = want[len(want)-int(*o.TailLines):]
		}
		w := strings.Join(want, "")
		if o.LimitBytes != nil && int64(len(w)) > *o.LimitBytes {
			w = w[:*o.LimitBytes]
		}
		if out.String() != w || errOut.Len() != 0 {
			t.Fatalf("stdout %q, stderr %q; want stdout %q (file %q)", out.String(), errOut.String(), w, b.String())
		}
	})
}
