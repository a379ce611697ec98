package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/cri-client/pkg/logs"
)

// processLogPoll is how often a followed process log file is checked for new lines.
const processLogPoll = 250 * time.Millisecond

// processLogs serves /containerLogs of a process pod (kubelet/processpods) from its component's log
// file at path: one key=value log line per line, each starting with time=<RFC 3339>. The options are
// those of containerLogs: tailLines, limitBytes, sinceSeconds/sinceTime (by the lines' time=), timestamps
// (the line's time= prefixed in RFC 3339 with nanoseconds, as for containers) and follow; previous is
// refused, the file holding every process instance.
func (s *Server) processLogs(w http.ResponseWriter, r *http.Request, path string, opts *logs.LogOptions, previous bool) {
	if previous {
		fail(w, &httpError{http.StatusBadRequest, "previous: a component process pod has no previous container; its log file holds every restart's lines"})
		return
	}
	if path == "" {
		fail(w, &httpError{http.StatusNotFound, "this component process has no log file"})
		return
	}
	f, err := os.Open(path)
	if err != nil {
		fail(w, &httpError{http.StatusNotFound, fmt.Sprintf("component log file: %v", err)})
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fw := newFlushWriter(w, opts.Follow)
	if err := copyProcessLog(r.Context(), f, path, fw, opts); err != nil && r.Context().Err() == nil {
		s.log.Warn("component logs", "path", path, "err", err)
		if !fw.wrote {
			fail(w, err)
		}
	}
}

// errLimit ends a copy at limitBytes.
var errLimit = errors.New("limitBytes reached")

// copyProcessLog writes the lines of f (opened from path) that opts select to w; with Follow it then
// waits for new lines until ctx ends, following path to its new file when the log is rotated (the old
// file renamed, a new one created at path: internal/logging.RotatingFile) once the old one is drained.
func copyProcessLog(ctx context.Context, f *os.File, path string, w io.Writer, opts *logs.LogOptions) error {
	limit := int64(-1)
	if opts.LimitBytes != nil {
		limit = *opts.LimitBytes
	}
	emit := func(line string) error {
		if !opts.Since.IsZero() || opts.Timestamp {
			t, ok := lineTime(line)
			if !opts.Since.IsZero() && (!ok || t.Before(opts.Since)) {
				return nil
			}
			if opts.Timestamp && ok {
				line = t.Format(time.RFC3339Nano) + " " + line
			}
		}
		if limit >= 0 && int64(len(line)) >= limit {
			if limit > 0 {
				_, _ = io.WriteString(w, line[:limit])
			}
			return errLimit
		}
		if limit >= 0 {
			limit -= int64(len(line))
		}
		_, err := io.WriteString(w, line)
		return err
	}
	rd := bufio.NewReaderSize(f, 64<<10)
	var tail []string
	keep := -1
	if opts.TailLines != nil {
		keep = int(*opts.TailLines)
	}
	var partial string
	for {
		line, err := rd.ReadString('\n')
		if err == nil {
			line, partial = partial+line, ""
			if keep >= 0 {
				tail = append(tail, line)
				if len(tail) > keep {
					tail = tail[1:]
				}
				continue
			}
			if err := emit(line); err != nil {
				return ignoreLimit(err)
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		partial += line
		break
	}
	if !opts.Follow && partial != "" { // the last line, not yet terminated
		if keep >= 0 {
			tail = append(tail, partial)
			if len(tail) > keep {
				tail = tail[1:]
			}
		} else if err := emit(partial); err != nil {
			return ignoreLimit(err)
		}
	}
	for _, l := range tail {
		if err := emit(l); err != nil {
			return ignoreLimit(err)
		}
	}
	if !opts.Follow {
		return nil
	}
	t := time.NewTicker(processLogPoll)
	defer t.Stop()
	cur := f
	defer func() {
		if cur != f {
			cur.Close()
		}
	}()
	drained := false // cur was read to its end after path named another file
	for {
		line, err := rd.ReadString('\n')
		switch {
		case err == nil:
			line, partial = partial+line, ""
			if err := emit(line); err != nil {
				return ignoreLimit(err)
			}
			continue
		case !errors.Is(err, io.EOF):
			return err
		}
		partial += line
		if rotated(cur, path) {
			if !drained { // lines written before the rename: read cur to its end once more
				drained = true
				continue
			}
			next, err := os.Open(path)
			if err == nil {
				if partial != "" { // the old file's last line, never terminated
					if err := emit(partial + "\n"); err != nil {
						return ignoreLimit(err)
					}
					partial = ""
				}
				if cur != f {
					cur.Close()
				}
				cur, drained = next, false
				rd.Reset(cur)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rotated reports whether path names a file other than f (f was renamed away and a new file created).
func rotated(f *os.File, path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && !os.SameFile(st, fi)
}

func ignoreLimit(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// lineTime parses the time=<RFC 3339> a key=value log line starts with.
func lineTime(line string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
