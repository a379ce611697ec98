package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// relay turns a child's output into structured log records tagged proc=<component>. The children run
// with --log-json, so every line is one slog JSON object; it is decoded (keeping its attribute order)
// and re-emitted through two handlers: the component's log file, which gets every record as text, and
// the console, which gets what its level lets through. A line that is not JSON becomes msg=<line> at
// INFO. relay is an io.Writer so it can be a child's Stdout and Stderr at once.
type relay struct {
	path    string
	file    *os.File
	toFile  slog.Handler
	console slog.Handler

	mu      sync.Mutex
	partial []byte
}

// newRelay opens (appending) the log file at path. console may be nil.
func newRelay(path, proc string, console slog.Handler) (*relay, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	r := &relay{path: path, file: f, toFile: slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})}
	r.toFile = r.toFile.WithAttrs([]slog.Attr{slog.String("proc", proc)})
	if console != nil {
		r.console = console.WithAttrs([]slog.Attr{slog.String("proc", proc)})
	}
	return r, nil
}

// Write splits p into lines; an unterminated tail waits for the next Write.
func (r *relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		r.line(r.partial[:i])
		r.partial = r.partial[i+1:]
	}
	if len(r.partial) > 64<<10 { // a runaway line without newline
		r.line(r.partial)
		r.partial = nil
	}
	return len(p), nil
}

// Close flushes a pending partial line and closes the file.
func (r *relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.partial) > 0 {
		r.line(r.partial)
		r.partial = nil
	}
	return r.file.Close()
}

func (r *relay) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	rec, ok := decodeRecord(b)
	if !ok {
		rec = slog.NewRecord(time.Now(), slog.LevelInfo, string(b), 0)
	}
	ctx := context.Background()
	_ = r.toFile.Handle(ctx, rec)
	if r.console != nil && r.console.Enabled(ctx, rec.Level) {
		_ = r.console.Handle(ctx, rec)
	}
}

// decodeRecord parses one slog JSON line (time, level, msg, then attributes in order).
func decodeRecord(b []byte) (slog.Record, bool) {
	if len(b) == 0 || b[0] != '{' {
		return slog.Record{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return slog.Record{}, false
	}
	var (
		ts    = time.Now()
		level = slog.LevelInfo
		msg   string
		attrs []slog.Attr
	)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return slog.Record{}, false
		}
		key, _ := kt.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return slog.Record{}, false
		}
		switch key {
		case slog.TimeKey:
			if s, ok := v.(string); ok {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					ts = t
				}
			}
		case slog.LevelKey:
			if s, ok := v.(string); ok {
				_ = level.UnmarshalText([]byte(strings.ToUpper(s)))
			}
		case slog.MessageKey:
			msg, _ = v.(string)
		default:
			attrs = append(attrs, slog.Any(key, jsonValue(v)))
		}
	}
	rec := slog.NewRecord(ts, level, msg, 0)
	rec.AddAttrs(attrs...)
	return rec, true
}

// jsonValue renders nested JSON values compactly so a text handler prints them on one line.
func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		return x.String()
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	default:
		return v
	}
}
