package volumes

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// TestSubPath: escapes through an absolute or a relative symlink, also in an inner component, are
// refused and mount nothing; a subPath through a symlink inside the volume is created and bind-mounted,
// a restart replaces the mount, and teardown removes it.
func TestSubPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	root := t.TempDir()
	m := New(filepath.Join(root, "kubelet"), "node", nil, nil, slog.Default())
	vol := filepath.Join(root, "vol")
	host := filepath.Join(root, "host")
	for _, d := range []string{vol, host, filepath.Join(vol, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"abs": host, "rel": "../host", "inner": "real/../../host", "ok": "real"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"abs", "rel", "inner", "abs/x/y", "ok/../abs"} {
		if _, err := m.SubPath("uid", "v", "c", 0, vol, sub); !errors.Is(err, ErrSubPathEscapes) {
			t.Errorf("subPath %q: want ErrSubPathEscapes, got %v", sub, err)
		}
	}
	for _, sub := range []string{"/etc", "../x", "a/../../x"} {
		if _, err := m.SubPath("uid", "v", "c", 0, vol, sub); err == nil {
			t.Errorf("subPath %q accepted", sub)
		}
	}
	if entries, _ := os.ReadDir(host); len(entries) != 0 {
		t.Fatalf("host directory written: %v", entries)
	}
	target, err := m.SubPath("uid", "v", "c", 1, vol, "ok/new/dir")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vol, "real", "new", "dir")); err != nil {
		t.Fatalf("subPath not created through the in-volume symlink: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vol, "real", "new", "dir", "f")); err != nil {
		t.Fatalf("the bind mount is not the subPath: %v", err)
	}
	if again, err := m.SubPath("uid", "v", "c", 1, vol, "ok/new/dir"); err != nil || again != target {
		t.Fatalf("remount: %q %v", again, err)
	}
	if mounts, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target)); len(mounts) != 1 {
		t.Fatalf("%d mounts on %s after a restart, want 1", len(mounts), target)
	}
	if err := m.TearDownPod("uid"); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := mountinfo.Mounted(target); mounted {
		t.Fatal("subPath mount left after teardown")
	}
}
