package etcd

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestLoggerForwardsWarnAndAbove: etcd's zap entries at warn and above become one slog record each,
// with the fields (an error as its text), the logger name and component=etcd; info is dropped.
func TestLoggerForwardsWarnAndAbove(t *testing.T) {
	var buf bytes.Buffer
	l := Logger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), DefaultLogLevel).Named("raft")
	l.Info("routine", zap.String("k", "v"))
	l.With(zap.String("member", "nodekit")).Warn("slow fdatasync", zap.Duration("took", 1500000000))
	l.Error("failed to compact", zap.Error(errors.New("disk full")))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (warn and error):\n%s", len(lines), out)
	}
	for _, want := range []string{`level=WARN msg="slow fdatasync" component=etcd member=nodekit took=1.5s logger=raft`} {
		if lines[0] != strings.SplitN(lines[0], "level=", 2)[0]+want {
			t.Errorf("warn line %q, want it to end with %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], `level=ERROR msg="failed to compact" component=etcd error="disk full" logger=raft`) {
		t.Errorf("error line %q", lines[1])
	}
}
