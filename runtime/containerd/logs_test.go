package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLastLogLines: an exit is explained by the last problem lines the child wrote after its offset,
// or by its last raw lines when it wrote no problem line.
func TestLastLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "containerd.log")
	f, from, err := openLog(path)
	if err != nil || from != 0 {
		t.Fatalf("openLog: offset %d, %v", from, err)
	}
	f.WriteString(`time="t" level=error msg="old child failed" error="boom"` + "\n")
	f.Close()

	f, from, err = openLog(path)
	if err != nil || from == 0 {
		t.Fatalf("reopen: offset %d, %v (want the size of the first child's output)", from, err)
	}
	f.WriteString(`time="t" level=info msg="starting containerd" version=1.6.20` + "\n")
	f.WriteString("panic: runtime error\n")
	f.Close()
	if got, want := lastLogLines(path, from), `time="t" level=info msg="starting containerd" version=1.6.20; panic: runtime error`; got != want {
		t.Errorf("no problem lines: %q, want the raw lines %q", got, want)
	}

	f, from, _ = openLog(path)
	for i := range 7 {
		f.WriteString(`time="t" level=warning msg="w` + string(rune('0'+i)) + `"` + "\n")
		f.WriteString(`time="t" level=info msg="chatter"` + "\n")
	}
	f.WriteString(`time="t" level=fatal msg="failed to load config" error="bad \"toml\""` + "\n")
	f.Close()
	if got, want := lastLogLines(path, from), `w3; w4; w5; w6; failed to load config: bad "toml"`; got != want {
		t.Errorf("problem lines: %q, want %q", got, want)
	}
	fi, _ := os.Stat(path)
	if got := lastLogLines(path, fi.Size()); got != "" {
		t.Errorf("nothing written after the offset: %q", got)
	}
	if got := lastLogLines(filepath.Join(t.TempDir(), "missing.log"), 0); got != "" {
		t.Errorf("missing file: %q", got)
	}

	// A long tail: only the last tailBytes are read, and the cut first line is dropped.
	f, from, _ = openLog(path)
	f.WriteString(`time="t" level=error msg="` + strings.Repeat("x", tailBytes) + `"` + "\n")
	f.WriteString(`time="t" level=error msg="last"` + "\n")
	f.Close()
	if got := lastLogLines(path, from); got != "last" {
		t.Errorf("long tail: %q, want %q", got, "last")
	}
}
