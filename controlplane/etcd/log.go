package etcd

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultLogLevel is the least severe of etcd's own log entries that reach the server log: warnings
// and errors (slow requests, leader changes, disk trouble, compaction failures), not its routine info.
const DefaultLogLevel = zapcore.WarnLevel

// Logger is a zap logger (etcd logs through zap) writing each entry at min or above as one slog record
// of log, with etcd's logger name, message and fields as keys and component=etcd.
func Logger(log *slog.Logger, min zapcore.Level) *zap.Logger {
	if log == nil {
		log = slog.Default()
	}
	return zap.New(&slogCore{log: log.With("component", "etcd"), min: min})
}

// slogCore is a zapcore.Core forwarding to slog.
type slogCore struct {
	log *slog.Logger
	min zapcore.Level
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log.With(attrs(fields)...), min: c.min}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelInfo
	switch {
	case e.Level >= zapcore.ErrorLevel:
		level = slog.LevelError
	case e.Level == zapcore.WarnLevel:
		level = slog.LevelWarn
	case e.Level <= zapcore.DebugLevel:
		level = slog.LevelDebug
	}
	args := attrs(fields)
	if e.LoggerName != "" {
		args = append(args, "logger", e.LoggerName)
	}
	c.log.Log(context.Background(), level, e.Message, args...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// attrs turns zap fields into slog key-value pairs through zap's map encoder (errors become their text).
func attrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		out = append(out, k, enc.Fields[k])
	}
	return out
}
