package logging

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestRotatingFile: a file appended past its size limit is renamed to <name>-<time>.log and a new one
// started; only maxBackups rotated files are kept; no line is split or lost across files (beyond the
// removed backups); an existing file is appended to and its 0640 mode kept.
func TestRotatingFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "kube-scheduler.log")
	w, err := rotatingFile(path, 1, 2) // 1 MB, two backups
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("log file before any write: %v %v", st, err)
	}
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	const lines = 45_000                   // 4.5 MB: four rotations
	for i := 0; i < lines; i++ {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Old backups are removed in the background: wait for exactly two.
	var backups []string
	for i := 0; i < 200; i++ {
		backups, _ = filepath.Glob(filepath.Join(dir, "kube-scheduler-*.log"))
		if len(backups) == 2 {
			break
		}
		sleep()
	}
	if len(backups) != 2 {
		t.Fatalf("rotated files %v, want the 2 newest", backups)
	}
	sort.Strings(backups)
	total := 0
	for _, f := range append(backups, path) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(f)
		if len(b) > 1<<20 || len(b)%len(line) != 0 || bytes.Count(b, []byte("\n")) != len(b)/len(line) || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: %d bytes, mode %v: over 1 MB, a split line or not 0640", f, len(b), st.Mode().Perm())
		}
		total += len(b) / len(line)
	}
	// The current file plus two full backups: each full file holds floor(1 MB / 100) lines.
	full := (1 << 20) / len(line)
	if want := 2*full + (lines - 4*full); total != want {
		t.Errorf("%d lines in the kept files, want %d", total, want)
	}

	// Reopened (a server restart): appended to, not truncated or rotated.
	w, err = rotatingFile(path, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if _, err := w.Write([]byte("restarted\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	after, _ := os.ReadFile(path)
	if string(after) != string(before)+"restarted\n" {
		t.Errorf("reopened file: %d bytes, want the %d before plus the new line", len(after), len(before))
	}
}

func sleep() { <-time.After(10 * time.Millisecond) }
