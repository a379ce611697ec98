package containerd

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		out       string
		want      string
		configVer int
		wantErr   string
	}{
		{out: "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", want: "1.6.20", configVer: 2},
		{out: "containerd github.com/containerd/containerd v1.7.13 7c3aca7a610df76212171d200ca3811ff6096eb8", want: "1.7.13", configVer: 2},
		{out: "containerd github.com/containerd/containerd/v2 2.4.2+unknown \n", want: "2.4.2", configVer: 4},
		{out: "containerd github.com/containerd/containerd/v2 v2.1.0-rc.1 abc", want: "2.1.0", configVer: 3},
		{out: "containerd github.com/containerd/containerd v1.5.9 abc", wantErr: "too old"},
		{out: "docker 20.10", wantErr: `want "containerd <package> <version>`},
		{out: "containerd github.com/containerd/containerd banana", wantErr: `version "banana": want major.minor.patch`},
	} {
		v, err := ParseVersion(tc.out)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseVersion(%q) = %v, %v; want error containing %q", tc.out, v, err, tc.wantErr)
			}
			continue
		}
		if err != nil || v.String() != tc.want || v.ConfigVersion() != tc.configVer {
			t.Errorf("ParseVersion(%q) = %v (config %d), %v; want %s (config %d)", tc.out, v, v.ConfigVersion(), err, tc.want, tc.configVer)
		}
	}
}

func TestCapEffHas(t *testing.T) {
	// CapEff of a root process without CAP_SYS_RESOURCE (bit 24 clear) and of a full root.
	without := "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n"
	full := "CapEff:\t000001ffffffffff\n"
	if has, err := capEffHas(strings.NewReader(without), capSysResource); err != nil || has {
		t.Errorf("capEffHas(without) = %v, %v", has, err)
	}
	if has, err := capEffHas(strings.NewReader(full), capSysResource); err != nil || !has {
		t.Errorf("capEffHas(full) = %v, %v", has, err)
	}
	if _, err := capEffHas(strings.NewReader("Name:\tx\n"), capSysResource); err == nil {
		t.Error("capEffHas without a CapEff line: no error")
	}
}

func baseParams(v Version) ConfigParams {
	return ConfigParams{
		Version: v, Root: "/d/root", State: "/d/state", Address: "/d/containerd.sock",
		SandboxImage: "nodekit.local/pause:3.10", CNIBinDirs: []string{"/usr/lib/cni"}, CNIConfDir: "/d/net.d",
		CgroupDriver: "cgroupfs", RegistryConfigPath: "/d/certs.d",
	}
}

func TestRenderConfigV2(t *testing.T) {
	v, _ := ParseVersion("containerd github.com/containerd/containerd 1.6.20~ds1 x")
	for _, restrict := range []bool{true, false} {
		p := baseParams(v)
		p.RestrictOOMScoreAdj = restrict
		out, err := RenderConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		for _, want := range []string{
			"version = 2\n",
			`root = "/d/root"`, `state = "/d/state"`, "[grpc]\n  address = \"/d/containerd.sock\"",
			`[plugins."io.containerd.grpc.v1.cri"]` + "\n    sandbox_image = \"nodekit.local/pause:3.10\"",
			"restrict_oom_score_adj = " + map[bool]string{true: "true", false: "false"}[restrict],
			`stream_server_port = "0"`,
			`path = "/d/root/opt"`,
			`runtime_type = "io.containerd.runc.v2"`,
			"SystemdCgroup = false",
			`Root = "/d/state/runc"`,
			`bin_dir = "/usr/lib/cni"`, `conf_dir = "/d/net.d"`,
			`config_path = "/d/certs.d"`,
		} {
			if !strings.Contains(s, want) {
				t.Errorf("v2 config (restrict=%v) lacks %q:\n%s", restrict, want, s)
			}
		}
		for _, bad := range []string{"io.containerd.cri.v1", "bin_dirs", "pinned_images", "version = 3", "version = 4"} {
			if strings.Contains(s, bad) {
				t.Errorf("v2 config has v3 setting %q", bad)
			}
		}
	}
}

func TestRenderConfigV3(t *testing.T) {
	v, _ := ParseVersion("containerd github.com/containerd/containerd/v2 2.4.2+unknown")
	v20, _ := ParseVersion("containerd github.com/containerd/containerd/v2 v2.0.5 abc")
	if out, err := RenderConfig(baseParams(v20)); err != nil || !strings.HasPrefix(string(out), "version = 3\n") {
		t.Errorf("containerd 2.0 config: %v\n%s", err, out)
	}
	for _, restrict := range []bool{true, false} {
		p := baseParams(v)
		p.RestrictOOMScoreAdj = restrict
		p.CNIBinDirs = []string{"/opt/nodekit/cni", "/usr/lib/cni"}
		p.CgroupDriver = "systemd"
		out, err := RenderConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		for _, want := range []string{
			"version = 4\n",
			`[plugins."io.containerd.cri.v1.runtime"]` + "\n    restrict_oom_score_adj = " + map[bool]string{true: "true", false: "false"}[restrict],
			`[plugins."io.containerd.cri.v1.runtime".cni]` + "\n      bin_dirs = [\"/opt/nodekit/cni\", \"/usr/lib/cni\"]",
			`[plugins."io.containerd.cri.v1.images".pinned_images]` + "\n      sandbox = \"nodekit.local/pause:3.10\"",
			`[plugins."io.containerd.cri.v1.images".registry]` + "\n      config_path = \"/d/certs.d\"",
			`[plugins."io.containerd.nri.v1.nri"]` + "\n    disable = true",
			"SystemdCgroup = true",
			`Root = "/d/state/runc"`,
			`stream_server_port = "0"`,
		} {
			if !strings.Contains(s, want) {
				t.Errorf("v3 config (restrict=%v) lacks %q:\n%s", restrict, want, s)
			}
		}
		if strings.Contains(s, "sandbox_image") || strings.Contains(s, "bin_dir =") {
			t.Errorf("v3 config has a v2 setting:\n%s", s)
		}
	}
}

func TestRenderConfigErrors(t *testing.T) {
	v1, _ := ParseVersion("containerd github.com/containerd/containerd 1.6.20 x")
	for _, tc := range []struct {
		mod  func(*ConfigParams)
		want string
	}{
		{func(p *ConfigParams) { p.Root = "rel" }, `Root "rel" must be an absolute path`},
		{func(p *ConfigParams) { p.SandboxImage = "" }, "SandboxImage is empty"},
		{func(p *ConfigParams) { p.CgroupDriver = "cgroup" }, `CgroupDriver "cgroup" must be cgroupfs or systemd`},
		{func(p *ConfigParams) { p.CNIBinDirs = []string{"/a", "/b"} }, "reads a single CNI bin_dir, CNIBinDirs has 2"},
		{func(p *ConfigParams) { p.CNIBinDirs = []string{"a"} }, `CNIBinDirs entry "a" must be an absolute path`},
		{func(p *ConfigParams) { p.LogLevel = "loud" }, `LogLevel "loud"`},
		{func(p *ConfigParams) { p.Version = Version{} }, "Version is not set"},
	} {
		p := baseParams(v1)
		tc.mod(&p)
		if _, err := RenderConfig(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RenderConfig: %v, want error containing %q", err, tc.want)
		}
	}
}

func TestTOMLString(t *testing.T) {
	if got := tomlString("a\"b\\c\nd\x01"); got != `"a\"b\\c\u000Ad\u0001"` {
		t.Errorf("tomlString = %s", got)
	}
}

func TestParseLogfmt(t *testing.T) {
	got := parseLogfmt(`time="2026-11-29T18:00:00Z" level=error msg="failed to load \"x\"" error="boom: no" plugin=cri`)
	want := map[string]string{"time": "2026-11-29T18:00:00Z", "level": "error", "msg": `failed to load "x"`, "error": "boom: no", "plugin": "cri"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseLogfmt[%s] = %q, want %q", k, got[k], v)
		}
	}
}
