package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRegistryHost(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRegistryHost(dir, "127.0.0.1:5000"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "127.0.0.1:5000", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`server = "http://127.0.0.1:5000"`, `[host."http://127.0.0.1:5000"]`, `capabilities = ["pull", "resolve"]`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("hosts.toml lacks %q:\n%s", want, data)
		}
	}
	for host, want := range map[string]string{
		"10.0.0.1:5000": "only allowed for loopback",
		"registry.io":   "want host:port",
		"[::1]:5000":    "",
	} {
		err := WriteRegistryHost(dir, host)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("WriteRegistryHost(%q) = %v, want %q", host, err, want)
		}
	}
}

func TestLinkBinDirs(t *testing.T) {
	a, b, dst := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "cni-bin")
	os.WriteFile(filepath.Join(a, "nodekit"), []byte("a"), 0o755)
	os.WriteFile(filepath.Join(a, "bridge"), []byte("a"), 0o755)
	os.WriteFile(filepath.Join(b, "bridge"), []byte("b"), 0o755)
	os.WriteFile(filepath.Join(b, "loopback"), []byte("b"), 0o755)
	os.MkdirAll(dst, 0o755)
	os.WriteFile(filepath.Join(dst, "stale"), nil, 0o644)
	if err := linkBinDirs(dst, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"nodekit": a, "bridge": a, "loopback": b} {
		if target, err := os.Readlink(filepath.Join(dst, name)); err != nil || target != filepath.Join(want, name) {
			t.Errorf("%s -> %q, %v; want %s", name, target, err, filepath.Join(want, name))
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "stale")); !os.IsNotExist(err) {
		t.Errorf("stale entry survived: %v", err)
	}
}
