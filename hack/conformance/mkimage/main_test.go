package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestTarTree(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o755)
	os.Chmod(filepath.Join(dir, "tmp"), os.ModeSticky|0o777)
	os.WriteFile(filepath.Join(dir, "bin", "busybox"), []byte("ELF"), 0o755)
	os.Symlink("/bin/busybox", filepath.Join(dir, "bin", "sh"))
	os.WriteFile(filepath.Join(dir, "bin", "nnp"), []byte("ELF"), 0o755)
	os.Chmod(filepath.Join(dir, "bin", "nnp"), os.ModeSetuid|os.ModeSetgid|0o755)
	data, err := tarTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		got = append(got, h.Name+" "+string(h.Typeflag)+" "+h.Linkname+" "+os.FileMode(h.Mode).String())
	}
	want := []string{
		"bin/ 5  -rwxr-xr-x",
		"bin/busybox 0  -rwxr-xr-x",
		"bin/nnp 0  -rwxr-xr-x",
		"bin/sh 2 /bin/busybox -rwxrwxrwx",
		"tmp/ 5  -rwxrwxrwx",
	}
	if len(got) != len(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %q, want %q", i, got[i], want[i])
		}
	}
	// The sticky bit of /tmp (tar mode 01777) and the setuid and setgid bits (06755) are kept.
	tr = tar.NewReader(bytes.NewReader(data))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if h.Name == "tmp/" && h.Mode != 0o1777 {
			t.Errorf("tmp/ mode %o, want 1777", h.Mode)
		}
		if h.Name == "bin/nnp" && h.Mode != 0o6755 {
			t.Errorf("bin/nnp mode %o, want 6755", h.Mode)
		}
	}
}
