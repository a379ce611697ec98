package pagetrim

import (
	"os"
	"strings"
	"testing"
)

// residentExeKiB sums the resident KiB of this process's read-only mappings of its executable.
func residentExeKiB(t *testing.T) int64 {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := readSmaps("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var kib int64
	for _, m := range maps {
		if m.path == exe && !strings.Contains(m.perms, "w") {
			kib += m.rssKiB
		}
	}
	return kib
}

func TestExecutableDropsPagesAndKeepsRunning(t *testing.T) {
	before := residentExeKiB(t)
	if before == 0 {
		t.Fatal("no resident pages of the executable's read-only mappings before the drop")
	}
	dropped, err := Executable()
	if err != nil {
		t.Fatal(err)
	}
	after := residentExeKiB(t) // this call's own code faults back in
	if dropped < before/2 || after >= before {
		t.Errorf("resident read-only executable pages: %d KiB before, %d KiB dropped, %d KiB after", before, dropped, after)
	}
	// The code and data that fault back in are intact: the same mappings parse the same way again.
	if _, err := readSmaps("/proc/self/smaps"); err != nil {
		t.Fatal(err)
	}
	t.Logf("resident read-only executable pages: %d KiB before, %d KiB after", before, after)
}

func TestReadSmapsRejectsGarbage(t *testing.T) {
	p := t.TempDir() + "/smaps"
	if err := os.WriteFile(p, []byte("zzzz-yyyy r-xp 0 0:0 0 /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSmaps(p); err == nil || !strings.Contains(err.Error(), "bad mapping line") {
		t.Errorf("readSmaps of garbage = %v, want a bad mapping line error", err)
	}
}
