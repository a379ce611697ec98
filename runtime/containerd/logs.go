package containerd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The managed containerd's stdout and stderr go to one file, appended to across restarts and never
// relayed into nodekit's own log stream (k3s keeps its containerd's output in
// <data-dir>/agent/containerd/containerd.log the same way): containerd logs its own normal conditions
// at error level (e.g. "failed to load cni during init" until the node's CNI config is written), which
// would read as failures of nodekit. The supervisor logs its own view instead — started, ready,
// exited with status and the last lines of this file, restarted — and reads the file only to explain an
// exit.

// tailBytes bounds how much of the log file is read to explain an exit.
const tailBytes = 64 << 10

// keepLines is how many lines an exit report quotes.
const keepLines = 5

// openLog opens path for appending (creating it and its directory, mode 0640) and returns the file
// with its size, the offset from which the new child's lines start.
func openLog(path string) (*os.File, int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, 0, fmt.Errorf("containerd: log file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, 0, fmt.Errorf("containerd: log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("containerd: log file: %w", err)
	}
	return f, fi.Size(), nil
}

// lastLogLines summarises what one containerd child wrote to the log file at path from offset on (at
// most the last 64 KiB of it): its last warning/error/fatal/panic lines (containerd's logrus text
// format, quoted as `msg: error`), or, when it wrote none, its last raw lines; at most keepLines, oldest
// first, joined with "; ". It returns "" when nothing can be read.
func lastLogLines(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	start := max(from, fi.Size()-tailBytes)
	if start >= fi.Size() {
		return ""
	}
	data, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return ""
	}
	if start > from { // the first line is cut
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	var problems, raw []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		raw = append(raw, line)
		fields := parseLogfmt(line)
		msg, ok := fields["msg"]
		if !ok {
			continue
		}
		switch fields["level"] {
		case "warning", "warn", "error", "fatal", "panic":
			if e := fields["error"]; e != "" {
				msg += ": " + e
			}
			problems = append(problems, msg)
		}
	}
	out := problems
	if len(out) == 0 {
		out = raw
	}
	return strings.Join(out[max(0, len(out)-keepLines):], "; ")
}

// parseLogfmt splits `k=v k2="quoted \"v\""` into a map. Malformed tails are ignored.
func parseLogfmt(s string) map[string]string {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(s, " ") {
		eq := strings.IndexByte(s, '=')
		sp := strings.IndexByte(s, ' ')
		if eq <= 0 || (sp >= 0 && sp < eq) {
			return out
		}
		key := s[:eq]
		s = s[eq+1:]
		if strings.HasPrefix(s, `"`) {
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return out
			}
			v, err := strconv.Unquote(s[:end+1])
			if err != nil {
				v = s[1:end]
			}
			out[key] = v
			s = s[end+1:]
			continue
		}
		sp = strings.IndexByte(s, ' ')
		if sp < 0 {
			out[key] = s
			return out
		}
		out[key] = s[:sp]
		s = s[sp:]
	}
	return out
}
