// Package logging sets up the structured logger every nodekit command logs through: one slog handler
// (key=value text or JSON lines) at a chosen level, made the process default, with klog — what
// client-go, k8s.io/apiserver and the other Kubernetes libraries log through — routed into the same
// handler with its levels kept (klog's errors are ERROR records with their keys, not text at INFO).
package logging

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// ParseLevel parses "debug", "info", "warn" or "error" (slog's names, any case).
func ParseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return lv, nil
}

// NewHandler returns a handler writing records at level and above to w: JSON lines when asJSON, else
// slog's key=value text. level is as for ParseLevel.
func NewHandler(w io.Writer, level string, asJSON bool) (slog.Handler, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	if asJSON {
		return slog.NewJSONHandler(w, opts), nil
	}
	return slog.NewTextHandler(w, opts), nil
}

// Install makes h the process's default slog handler (and so the standard library log's) and routes
// klog into it through logr's slog bridge: klog.ErrorS(err, msg, kv...) becomes an ERROR record with
// msg, "err" and the key/values; InfoS an INFO record; klog's verbosity (-v, default 0) still decides
// which V(n) lines are emitted at all.
func Install(h slog.Handler) {
	slog.SetDefault(slog.New(h))
	klog.SetLogger(logr.FromSlogHandler(h))
}

// OpenFile opens the log file at path for appending, rotated by size (RotatingFile: created 0640, its
// directory 0750), and returns a key=value text handler writing records at level and above to it, and
// the file, for the caller to close. A component's own log file (<data-dir>/logs/<component>.log) is
// opened with it.
func OpenFile(path, level string) (slog.Handler, io.Closer, error) {
	f, err := RotatingFile(path)
	if err != nil {
		return nil, nil, err
	}
	h, err := NewHandler(f, level, false)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return h, f, nil
}
