package containerd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCgroupDriver(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct{ config, want string }{
		{"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n", "systemd"},
		{"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n", "cgroupfs"},
		{"version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nSystemdCgroup = true\n", "systemd"},
		// The default runtime decides, not any runtime.
		{"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n default_runtime_name = \"crun\"\n" +
			"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n SystemdCgroup = true\n", "cgroupfs"},
		{"[plugins.cri]\n  systemd_cgroup = true\n", "systemd"},
		{"version = 2\n", "cgroupfs"},
		// This repo's own generated configs, for containerd 1.6 (version 2) and 2.1 (version 3).
		{configText(t, "1.6.20", "systemd"), "systemd"},
		{configText(t, "1.6.20", "cgroupfs"), "cgroupfs"},
		{configText(t, "2.1.4", "systemd"), "systemd"},
		{configText(t, "2.1.4", "cgroupfs"), "cgroupfs"},
	} {
		p := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(p, []byte(tc.config), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ConfigCgroupDriver(p); err != nil || got != tc.want {
			t.Errorf("case %d: %q, %v; want %q", i, got, err, tc.want)
		}
	}
	if _, err := ConfigCgroupDriver(filepath.Join(dir, "none.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.toml"), []byte("[plugins\n"), 0o644)
	if _, err := ConfigCgroupDriver(filepath.Join(dir, "bad.toml")); err == nil || !strings.Contains(err.Error(), "bad.toml") {
		t.Errorf("bad TOML: %v", err)
	}
}

func configText(t *testing.T, version, driver string) string {
	v, err := ParseVersion("containerd github.com/containerd/containerd v" + version + " x")
	if err != nil {
		t.Fatal(err)
	}
	p := baseParams(v)
	p.CgroupDriver = driver
	out, err := RenderConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
