package containerd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
)

// ConfigParams is everything the generated containerd config depends on, already resolved (no host
// detection happens in RenderConfig, so it is a pure function and unit-testable).
type ConfigParams struct {
	// Version selects the schema (Version.ConfigVersion): 2 for containerd 1.x, 3 or 4 for 2.x.
	Version Version
	// Root and State are containerd's --root (persistent: content, snapshots, metadata) and --state
	// (ephemeral: sockets, task bundles, pod shm mounts) directories. Absolute paths.
	Root, State string
	// Address is containerd's gRPC socket path; the CRI endpoint is unix://Address.
	Address string
	// SandboxImage is the pod sandbox (pause) image reference, e.g. bundled.Pause.
	SandboxImage string
	// CNIBinDirs are the directories containerd's CRI plugin searches for CNI plugin binaries.
	// containerd 1.x reads a single bin_dir, so version 2 configs need exactly one entry (the
	// Supervisor links several directories into one for 1.x).
	CNIBinDirs []string
	// CNIConfDir is the directory holding the CNI network config (.conflist/.conf); the CRI plugin
	// loads the first one by name (max_conf_num = 1), like the kubelet's CNI convention.
	CNIConfDir string
	// CgroupDriver is "cgroupfs" or "systemd" (runc's SystemdCgroup option).
	CgroupDriver string
	// RestrictOOMScoreAdj caps containers' oom_score_adj at containerd's own; needed when the process
	// lacks CAP_SYS_RESOURCE (see HasCapSysResource).
	RestrictOOMScoreAdj bool
	// RegistryConfigPath is the CRI registry config_path: a directory of <host>/hosts.toml files
	// (containerd's docs/hosts.md), used for the loopback `nodekit registry` over plain HTTP.
	RegistryConfigPath string
	// LogLevel is containerd's own log level (debug, info, warn, error); empty means "info".
	LogLevel string
}

// Validate checks that every field is set and well formed; errors name the field.
func (p ConfigParams) Validate() error {
	paths := map[string]string{"Root": p.Root, "State": p.State, "Address": p.Address, "CNIConfDir": p.CNIConfDir, "RegistryConfigPath": p.RegistryConfigPath}
	for _, name := range []string{"Root", "State", "Address", "CNIConfDir", "RegistryConfigPath"} {
		if v := paths[name]; v == "" || !filepath.IsAbs(v) {
			return fmt.Errorf("containerd config: %s %q must be an absolute path", name, v)
		}
	}
	if p.Version.Major == 0 {
		return fmt.Errorf("containerd config: Version is not set")
	}
	if p.SandboxImage == "" {
		return fmt.Errorf("containerd config: SandboxImage is empty")
	}
	if len(p.CNIBinDirs) == 0 {
		return fmt.Errorf("containerd config: CNIBinDirs is empty")
	}
	for _, d := range p.CNIBinDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("containerd config: CNIBinDirs entry %q must be an absolute path", d)
		}
	}
	if p.Version.ConfigVersion() == 2 && len(p.CNIBinDirs) != 1 {
		return fmt.Errorf("containerd config: containerd %s reads a single CNI bin_dir, CNIBinDirs has %d", p.Version, len(p.CNIBinDirs))
	}
	if p.CgroupDriver != "cgroupfs" && p.CgroupDriver != "systemd" {
		return fmt.Errorf("containerd config: CgroupDriver %q must be cgroupfs or systemd", p.CgroupDriver)
	}
	switch p.LogLevel {
	case "", "trace", "debug", "info", "warn", "error", "fatal", "panic":
	default:
		return fmt.Errorf("containerd config: LogLevel %q is not a containerd log level", p.LogLevel)
	}
	return nil
}

// RenderConfig returns the containerd config.toml for p: schema version 2 (plugin
// "io.containerd.grpc.v1.cri") for containerd 1.x, version 3 or 4 ("io.containerd.cri.v1.runtime" and
// "io.containerd.cri.v1.images") for 2.x (see Version.ConfigVersion). Beyond the CRI settings it keeps containerd off global paths
// other instances use: the opt plugin lives under Root, the CRI streaming server listens on a random
// loopback port instead of :10010, runc keeps its state under State, and (2.x) NRI, whose socket is
// /var/run/nri/nri.sock, is disabled. What containerd does not let a config move stays shared with other
// instances: shim sockets in /run/containerd/s (named by a hash of socket, namespace and ID), pod network
// namespaces in /var/run/netns and libcni's result cache in /var/lib/cni.
func RenderConfig(p ConfigParams) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.LogLevel == "" {
		p.LogLevel = "info"
	}
	tmpl := configV2
	if p.Version.ConfigVersion() >= 3 {
		tmpl = configV3
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// tomlString quotes s as a TOML basic string (TOML v1.0.0 "String": \" \\ and \uXXXX for control
// characters).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// runcRuntime renders the CRI plugin's runc runtime table (the same in config versions 2, 3 and 4,
// under a different plugin): the runc v2 shim, with runc's systemd cgroup driver on or off and runc's
// state under <state>/runc instead of the shared /run/containerd/runc.
func runcRuntime(plugin string, p ConfigParams) string {
	t := "[plugins." + tomlString(plugin) + ".containerd.runtimes.runc]"
	return "      " + t + "\n        runtime_type = \"io.containerd.runc.v2\"\n\n" +
		"        " + t[:len(t)-1] + ".options]\n" +
		fmt.Sprintf("          SystemdCgroup = %v\n", p.CgroupDriver == "systemd") +
		"          Root = " + tomlString(p.State+"/runc") + "\n"
}

var funcs = template.FuncMap{"q": tomlString, "qs": tomlStrings, "runc": runcRuntime}

const header = `# Generated by nodekit for containerd {{.Version}}; rewritten at every start.
root = {{q .Root}}
state = {{q .State}}

[grpc]
  address = {{q .Address}}

[debug]
  level = {{q .LogLevel}}

[plugins]
`

var configV2 = template.Must(template.New("v2").Funcs(funcs).Parse(`version = 2
# Snapshotters CRI does not use here; devmapper would only log that it is not configured.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
` + header + `  [plugins."io.containerd.internal.v1.opt"]
    path = {{q (print .Root "/opt")}}

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = {{q .SandboxImage}}
    restrict_oom_score_adj = {{.RestrictOOMScoreAdj}}
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"

{{runc "io.containerd.grpc.v1.cri" .}}
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = {{q (index .CNIBinDirs 0)}}
      conf_dir = {{q .CNIConfDir}}
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = {{q .RegistryConfigPath}}
`))

var configV3 = template.Must(template.New("v3").Funcs(funcs).Parse(`version = {{.Version.ConfigVersion}}
` + header + `  [plugins."io.containerd.internal.v1.opt"]
    path = {{q (print .Root "/opt")}}

  [plugins."io.containerd.nri.v1.nri"]
    disable = true

  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins."io.containerd.cri.v1.runtime"]
    restrict_oom_score_adj = {{.RestrictOOMScoreAdj}}

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"

{{runc "io.containerd.cri.v1.runtime" .}}
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = {{qs .CNIBinDirs}}
      conf_dir = {{q .CNIConfDir}}
      max_conf_num = 1

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"

    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = {{q .SandboxImage}}

    [plugins."io.containerd.cri.v1.images".registry]
      config_path = {{q .RegistryConfigPath}}
`))
