package install

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInstallAtomicReplace(t *testing.T) {
	src := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(src, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cni", "bin")
	dst, err := Install(src, bin)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dst)
	if err != nil || st.Mode().Perm() != 0o755 || filepath.Base(dst) != "nodekit-cni" {
		t.Fatalf("installed %s: %v %v", dst, st, err)
	}
	// A process holding the old file keeps its content; the path shows the new one.
	old, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := os.WriteFile(src, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(src, bin); err != nil {
		t.Fatal(err)
	}
	oldB := make([]byte, 2)
	_, _ = old.Read(oldB)
	newB, _ := os.ReadFile(dst)
	if !bytes.Equal(oldB, []byte("v1")) || !bytes.Equal(newB, []byte("v2")) {
		t.Errorf("old handle reads %q, path reads %q; want v1, v2", oldB, newB)
	}
	if ents, _ := os.ReadDir(bin); len(ents) != 1 {
		t.Errorf("bin dir holds %d entries, want 1 (no temporaries)", len(ents))
	}
	if _, err := Install(filepath.Join(t.TempDir(), "missing"), bin); err == nil {
		t.Error("installing a missing file succeeded")
	}
}
