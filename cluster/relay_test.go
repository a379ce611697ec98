package cluster

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelay feeds a child's output in odd chunks: JSON slog lines keep their time, level, message and
// attribute order and gain proc=<component>; a non-JSON line becomes an INFO message; the console gets
// only what its level enables, the file everything.
func TestRelay(t *testing.T) {
	var console bytes.Buffer
	path := filepath.Join(t.TempDir(), "agent.log")
	r, err := newRelay(path, "agent", slog.NewTextHandler(&console, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err != nil {
		t.Fatal(err)
	}
	in := `{"time":"2026-01-02T03:04:05.000000006Z","level":"INFO","msg":"pod started","pod":"default/a","n":3}` + "\n" +
		`{"time":"2026-01-02T03:04:06Z","level":"WARN","msg":"sync pod","pod":"default/b","err":"boom","meta":{"k":[1,2]}}` + "\n" +
		"plain text from a library\n" + `{"level":"ERROR","msg":"unterminated"}`
	for i := 0; i < len(in); i += 7 { // split lines across writes
		if _, err := r.Write([]byte(in[i:min(i+7, len(in))])); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		`time=2026-01-02T03:04:05.000Z level=INFO msg="pod started" proc=agent pod=default/a n=3`,
		`time=2026-01-02T03:04:06.000Z level=WARN msg="sync pod" proc=agent pod=default/b err=boom meta="{\"k\":[1,2]}"`,
		`level=INFO msg="plain text from a library" proc=agent`,
		`level=ERROR msg=unterminated proc=agent`,
	}
	if len(file) != len(want) {
		t.Fatalf("file has %d lines, want %d:\n%s", len(file), len(want), b)
	}
	for i, w := range want {
		if !strings.HasSuffix(file[i], w) && !strings.Contains(file[i], w) {
			t.Errorf("line %d:\n got %s\nwant %s", i, file[i], w)
		}
	}
	con := strings.Split(strings.TrimSpace(console.String()), "\n")
	if len(con) != 2 || !strings.Contains(con[0], `msg="sync pod" proc=agent`) || !strings.Contains(con[1], "msg=unterminated") {
		t.Errorf("console got:\n%s\nwant the WARN and ERROR lines only", console.String())
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/var/lib/nodekit/cni/nodekit", "/var/lib/nodekit", true},
		{"/var/lib/nodekit", "/var/lib/nodekit", true},
		{"/var/lib/nodekit-other/cni", "/var/lib/nodekit", false},
		{"/var/lib/nodekit/cni", "/tmp/x/data", false},
	} {
		if got := within(c.path, c.dir); got != c.want {
			t.Errorf("within(%s, %s) = %t, want %t", c.path, c.dir, got, c.want)
		}
	}
}
