package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// ANSI colours of the terminal output.
const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

// WriteText writes the report for a terminal: a header, one line per step ("TIME COMPONENT ✓/✗ STEP
// DETAIL", time as 15:04:05, "-" when unknown) and the VERDICT with its FIX. color adds ANSI colours
// (callers pass true only when the output is a TTY).
func (r *Report) WriteText(w io.Writer, color bool) error {
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	var b strings.Builder
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	fmt.Fprintf(&b, "%s\n", paint(ansiBold, r.Kind+" "+name))
	for _, s := range r.Steps {
		ts := "-"
		if !s.Time.IsZero() {
			ts = s.Time.Local().Format(time.TimeOnly)
		}
		mark := paint(ansiGreen, "✓")
		if !s.OK {
			mark = paint(ansiRed, "✗")
		}
		detail := strings.ReplaceAll(s.Detail, "\n", "\n"+strings.Repeat(" ", 24))
		fmt.Fprintf(&b, "%s\n", strings.TrimRight(fmt.Sprintf("%-8s  %-10s %s %s  %s", ts, s.Component, mark, s.Step, detail), " "))
	}
	v := r.Verdict
	head := paint(ansiGreen, "VERDICT: OK")
	if v.Stuck {
		head = paint(ansiRed, "VERDICT: STUCK")
	}
	fmt.Fprintf(&b, "\n%s %s: %s\n", paint(ansiBold, head), v.Step, v.Message)
	if v.Fix != "" {
		fmt.Fprintf(&b, "%s %s\n", paint(ansiYellow, "FIX:"), v.Fix)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one indented JSON document (the Report struct's fields).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
