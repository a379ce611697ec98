package crictl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// logOptions select what `logs` prints from a CRI container log.
type logOptions struct {
	follow, timestamps bool
	tail               int64     // lines from the end; negative: all
	limitBytes         int64     // stop after this many bytes of content; negative: no limit
	since              time.Time // zero: from the start
	stream             string    // "stdout", "stderr" or "" for both
}

// logLine is one complete entry of a CRI log file.
type logLine struct {
	ts      time.Time
	stream  string
	content []byte // ends with '\n' for full lines
}

// parseLogLine parses one line of the CRI container log format (kubelet's CRI logging spec):
// "<RFC3339Nano timestamp> <stdout|stderr> <P|F> <content>". P marks a partial line whose content
// continues in the next entry; F a full one (the newline is added back).
func parseLogLine(line []byte) (ts time.Time, stream string, partial bool, content []byte, err error) {
	fields := bytes.SplitN(line, []byte(" "), 4)
	if len(fields) < 3 {
		return ts, "", false, nil, fmt.Errorf("malformed CRI log line %q", line)
	}
	if ts, err = time.Parse(time.RFC3339Nano, string(fields[0])); err != nil {
		return ts, "", false, nil, fmt.Errorf("CRI log line timestamp %q: %w", fields[0], err)
	}
	stream = string(fields[1])
	if stream != "stdout" && stream != "stderr" {
		return ts, "", false, nil, fmt.Errorf("CRI log line stream %q: want stdout or stderr", stream)
	}
	if len(fields) == 4 {
		content = fields[3]
	}
	switch string(fields[2]) {
	case "P":
		partial = true
	case "F":
	default:
		// Older runtimes wrote no tag: the third field is already content.
		content = bytes.Join(fields[2:], []byte(" "))
	}
	return ts, stream, partial, content, nil
}

// logReader assembles complete lines from a CRI log, joining partial entries per stream.
type logReader struct {
	src     *pushbackReader
	r       *bufio.Reader
	pending map[string]*logLine
}

// pushbackReader serves pushed-back bytes before reading on from the file; unlike io.MultiReader it
// keeps reading the file after an EOF, so a followed log can grow.
type pushbackReader struct {
	back []byte
	r    io.Reader
}

func (p *pushbackReader) Read(b []byte) (int, error) {
	if len(p.back) > 0 {
		n := copy(b, p.back)
		p.back = p.back[n:]
		return n, nil
	}
	return p.r.Read(b)
}

func newLogReader(r io.Reader) *logReader {
	src := &pushbackReader{r: r}
	return &logReader{src: src, r: bufio.NewReaderSize(src, 64<<10), pending: map[string]*logLine{}}
}

// next returns the next complete line, or io.EOF at the end of what is written so far; a half-written
// final line is pushed back and read again by the next call.
func (lr *logReader) next() (*logLine, error) {
	for {
		raw, err := lr.r.ReadBytes('\n')
		if err != nil {
			lr.src.back = append(raw, lr.src.back...)
			return nil, err
		}
		ts, stream, partial, content, perr := parseLogLine(bytes.TrimSuffix(raw, []byte("\n")))
		if perr != nil {
			return nil, perr
		}
		l := lr.pending[stream]
		if l == nil {
			l = &logLine{ts: ts, stream: stream}
		}
		l.content = append(l.content, content...)
		if partial {
			lr.pending[stream] = l
			continue
		}
		delete(lr.pending, stream)
		l.content = append(l.content, '\n')
		return l, nil
	}
}

// logWriter prints selected lines to stdout/stderr, applying --timestamps and --limit-bytes.
type logWriter struct {
	stdout, stderr io.Writer
	opts           *logOptions
	written        int64
}

var errLimitReached = errors.New("log byte limit reached")

func (w *logWriter) write(l *logLine) error {
	if (w.opts.stream != "" && l.stream != w.opts.stream) || (!w.opts.since.IsZero() && l.ts.Before(w.opts.since)) {
		return nil
	}
	out := w.stdout
	if l.stream == "stderr" {
		out = w.stderr
	}
	var b []byte
	if w.opts.timestamps {
		b = append([]byte(l.ts.Format(time.RFC3339Nano)), ' ')
	}
	b = append(b, l.content...)
	if w.opts.limitBytes >= 0 && w.written+int64(len(b)) > w.opts.limitBytes {
		b = b[:w.opts.limitBytes-w.written]
	}
	n, err := out.Write(b)
	w.written += int64(n)
	if err != nil {
		return err
	}
	if w.opts.limitBytes >= 0 && w.written >= w.opts.limitBytes {
		return errLimitReached
	}
	return nil
}

// readLogs prints the log file at path. With --tail N only the last N selected lines are printed. With
// --follow it keeps reading as the file grows until running() reports the container stopped (checked
// whenever no new data arrives for a second) or ctx ends.
func readLogs(ctx context.Context, path string, opts *logOptions, stdout, stderr io.Writer, running func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open container log: %w", err)
	}
	defer f.Close()
	lr := newLogReader(f)
	w := &logWriter{stdout: stdout, stderr: stderr, opts: opts}
	if opts.tail >= 0 {
		var ring []*logLine
		for {
			l, err := lr.next()
			if err != nil {
				if err == io.EOF {
					break
				}
				return err
			}
			if (opts.stream != "" && l.stream != opts.stream) || (!opts.since.IsZero() && l.ts.Before(opts.since)) {
				continue
			}
			ring = append(ring, l)
			if int64(len(ring)) > opts.tail {
				ring = ring[1:]
			}
		}
		for _, l := range ring {
			if err := w.write(l); err != nil {
				return ignoreLimit(err)
			}
		}
		if !opts.follow {
			return nil
		}
	}
	idle := time.Time{}
	for {
		l, err := lr.next()
		if err == nil {
			if err := w.write(l); err != nil {
				return ignoreLimit(err)
			}
			idle = time.Time{}
			continue
		}
		if err != io.EOF {
			return err
		}
		if !opts.follow {
			return nil
		}
		if idle.IsZero() {
			idle = time.Now()
		} else if time.Since(idle) > time.Second {
			if !running() {
				return nil
			}
			idle = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ignoreLimit(err error) error {
	if errors.Is(err, errLimitReached) {
		return nil
	}
	return err
}

// parseSince accepts an RFC 3339 timestamp (with or without zone, e.g. 2013-01-02T13:23:37), or a
// duration relative to now (42m, 1h30m).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 timestamp (2013-01-02T13:23:37) or a duration (42m)", s)
}

// previousLogPath names the log file of the previous attempt: ".../<attempt-1>.log" next to path.
func previousLogPath(path string, attempt uint32) string {
	return filepath.Join(filepath.Dir(path), strconv.FormatUint(uint64(attempt-1), 10)+filepath.Ext(path))
}

// logsCommand prints a container's log from the file the runtime writes (ContainerStatus.log_path).
func (a *app) logsCommand() *cobra.Command {
	var (
		opts             logOptions
		since            string
		previous, reopen bool
	)
	cmd := &cobra.Command{
		Use:   "logs CONTAINER-ID",
		Short: "Fetch the logs of a container",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch opts.stream {
			case "", "stdout", "stderr":
			default:
				return fmt.Errorf(`--stream %q: want "stdout" or "stderr"`, opts.stream)
			}
			var err error
			if opts.since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			c, cancel := signalContext(cmd)
			defer cancel()
			rt, id, err := a.container(c, args[0])
			if err != nil {
				return err
			}
			if reopen {
				if _, err := rt.ReopenContainerLog(c, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
					return fmt.Errorf("reopen container logs: %w", err)
				}
			}
			st, err := rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			if err != nil {
				return err
			}
			path := st.GetStatus().GetLogPath()
			if path == "" {
				return fmt.Errorf("container %s has no log path", id)
			}
			if previous {
				attempt := st.GetStatus().GetMetadata().GetAttempt()
				if attempt == 0 {
					return fmt.Errorf("previous terminated container %s not found", st.GetStatus().GetMetadata().GetName())
				}
				path = previousLogPath(path, attempt)
			}
			running := func() bool {
				s, err := rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
				return err == nil && s.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
			}
			return readLogs(c, path, &opts, a.out, a.errOut, running)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&opts.follow, "follow", "f", false, "follow log output")
	fl.BoolVarP(&previous, "previous", "p", false, "print the logs of the previous instance of the container in its pod")
	fl.BoolVarP(&reopen, "reopen", "r", false, "reopen the container's log file first")
	fl.Int64Var(&opts.tail, "tail", -1, "number of lines to show from the end of the logs; -1 for all")
	fl.Int64Var(&opts.limitBytes, "limit-bytes", -1, "maximum bytes of logs to return; -1 for no limit")
	fl.StringVar(&since, "since", "", "show logs since a timestamp (2013-01-02T13:23:37) or a relative time (42m)")
	fl.BoolVarP(&opts.timestamps, "timestamps", "t", false, "show timestamps")
	fl.StringVarP(&opts.stream, "stream", "s", "", "show only this stream (stdout or stderr); default both")
	return cmd
}
