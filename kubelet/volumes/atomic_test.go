package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := writeAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, nil); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if read("a") != "1" || read("sub/b") != "2" {
		t.Fatalf("contents a=%q sub/b=%q", read("a"), read("sub/b"))
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	if !strings.HasPrefix(first, "..") {
		t.Fatalf("..data -> %q, want a timestamped dir", first)
	}
	if st, _ := os.Stat(filepath.Join(dir, "sub/b")); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	// Unchanged payload: nothing rewritten.
	if err := writeAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Errorf("unchanged payload swapped ..data")
	}
	// Changed payload: swapped, removed key gone, old dir removed.
	if err := writeAtomic(dir, map[string]File{"a": {Data: []byte("new"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	if read("a") != "new" {
		t.Errorf("a = %q after update", read("a"))
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("removed key's link still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("old data dir still there")
	}
	for _, bad := range []string{"../x", "/abs", "..hidden", "a/../../b"} {
		if err := writeAtomic(dir, map[string]File{bad: {Data: nil, Mode: 0o644}}, nil); err == nil {
			t.Errorf("path %q accepted", bad)
		}
	}
}

// TestWriteAtomicFSGroup: with an fsGroup the files and directories belong to that group, files get at
// least 0440, directories setgid and the group's search bits (upstream's SetVolumeOwnership), and a
// rewrite of the same payload leaves the timestamped directory in place.
func TestWriteAtomicFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	dir := filepath.Join(t.TempDir(), "vol")
	gid := int64(4321)
	payload := map[string]File{"a": {Data: []byte("1"), Mode: 0o400}, "sub/b": {Data: []byte("2"), Mode: 0o644}}
	if err := writeAtomic(dir, payload, &gid); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"a": 0o440, "sub/b": 0o644, "sub": 0o755 | os.ModeDir | os.ModeSetgid, ".": 0o755 | os.ModeDir | os.ModeSetgid} {
		st, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if g := st.Sys().(*syscall.Stat_t).Gid; int64(g) != gid || st.Mode() != want {
			t.Errorf("%s: group %d mode %v, want group %d mode %v", p, g, st.Mode(), gid, want)
		}
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := writeAtomic(dir, payload, &gid); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Errorf("same payload rewritten: ..data %q -> %q", first, again)
	}
}
