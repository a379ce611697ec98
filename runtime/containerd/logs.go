package containerd

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// logPump turns containerd's stderr (logrus text lines: time="..." level=info msg="..." k=v) into
// slog records, one per line, and remembers the last warning and error lines for start-up errors.
//
// containerd's levels map to slog as info→Debug (containerd's info is start-up chatter for nodekit),
// warning→Warn, error/fatal/panic→Error, debug/trace→Debug. Lines that are not logfmt are logged at
// Info with the raw text.
type logPump struct {
	log *slog.Logger

	mu   sync.Mutex
	last []string // last problem lines (warn and above), newest last
}

const keepLines = 5

func (p *logPump) run(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.line(sc.Text())
	}
}

func (p *logPump) line(line string) {
	fields := parseLogfmt(line)
	msg, ok := fields["msg"]
	if !ok {
		if strings.TrimSpace(line) != "" {
			p.log.Info(line)
		}
		return
	}
	lvl := slog.LevelDebug
	switch fields["level"] {
	case "warning", "warn":
		lvl = slog.LevelWarn
	case "error", "fatal", "panic":
		lvl = slog.LevelError
	}
	if lvl >= slog.LevelWarn {
		p.mu.Lock()
		text := msg
		if e := fields["error"]; e != "" {
			text += ": " + e
		}
		p.last = append(p.last, text)
		if len(p.last) > keepLines {
			p.last = p.last[len(p.last)-keepLines:]
		}
		p.mu.Unlock()
	}
	if !p.log.Enabled(context.Background(), lvl) {
		return
	}
	attrs := make([]any, 0, 2*len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "msg" && k != "time" && k != "level" {
			attrs = append(attrs, k, fields[k])
		}
	}
	p.log.Log(context.Background(), lvl, msg, attrs...)
}

// lastProblems returns the last warning/error lines, joined for an error message.
func (p *logPump) lastProblems() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.last, "; ")
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
