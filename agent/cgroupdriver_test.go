package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/runtime/cri"
)

func TestCgroupDriverDetection(t *testing.T) {
	unimpl := func(context.Context) (string, error) {
		return "", fmt.Errorf("x: %w", cri.ErrRuntimeConfigUnimplemented)
	}
	systemdCRI := func(context.Context) (string, error) { return "systemd", nil }
	cfgSays := func(d string, err error) func(string) (string, error) {
		return func(string) (string, error) { return d, err }
	}
	for _, tc := range []struct {
		name       string
		cri        func(context.Context) (string, error)
		config     func(string) (string, error)
		configured string
		want       string
		wantErr    string
	}{
		{"containerd 2.x reports systemd", systemdCRI, cfgSays("", errors.New("not read")), "", "systemd", ""},
		{"flag agrees", systemdCRI, nil, "systemd", "systemd", ""},
		{"flag mismatches RuntimeConfig", systemdCRI, nil, "cgroupfs",
			"", `cgroupDriver: "cgroupfs" (--cgroup-driver or KubeletConfiguration) does not match the container runtime's cgroup driver "systemd" (from CRI RuntimeConfig)`},
		{"containerd 1.x config", unimpl, cfgSays("systemd", nil), "", "systemd", ""},
		{"flag mismatches 1.x config", unimpl, cfgSays("cgroupfs", nil), "systemd", "", `(from /etc/c.toml (SystemdCgroup))`},
		{"no config: the flag", unimpl, cfgSays("", fmt.Errorf("x: %w", fs.ErrNotExist)), "systemd", "systemd", ""},
		{"no config, no flag: cgroupfs", unimpl, cfgSays("", fmt.Errorf("x: %w", fs.ErrNotExist)), "", "cgroupfs", ""},
		{"bad config", unimpl, cfgSays("", errors.New("containerd config /etc/c.toml: bad")), "", "", "cgroup driver: containerd config /etc/c.toml: bad"},
		{"runtime down", func(context.Context) (string, error) { return "", errors.New("unavailable") }, nil, "", "", "cgroup driver: unavailable"},
	} {
		src, known, err := runtimeCgroupDriver(context.Background(), tc.cri, "/etc/c.toml", tc.config)
		got := ""
		if err == nil {
			got, err = decideCgroupDriver(tc.configured, src, known)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %q, %v; want error containing %q", tc.name, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
