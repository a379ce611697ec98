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
