package containerd

import (
	"fmt"
	"os"

	toml "github.com/pelletier/go-toml/v2"
)

// DefaultConfigPath is where containerd reads its config when started without --config.
const DefaultConfigPath = "/etc/containerd/config.toml"

// ConfigCgroupDriver returns the cgroup driver a containerd config file gives its CRI plugin's default
// runtime: "systemd" when that runtime's options set SystemdCgroup = true, else "cgroupfs" (containerd's
// default). It reads config version 3 (containerd 2.x, plugins."io.containerd.cri.v1.runtime"),
// version 2 (containerd 1.x, plugins."io.containerd.grpc.v1.cri") and version 1 (plugins.cri, where
// systemd_cgroup = true also selects systemd for the v1 shim). The default runtime is
// containerd.default_runtime_name, "runc" when unset. This is how the kubelet learns the driver of a
// containerd 1.x, whose CRI has no RuntimeConfig. Errors: the file cannot be read (wrapping
// fs.ErrNotExist when absent) or is not TOML.
func ConfigCgroupDriver(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("containerd config %s: %w", path, err)
	}
	plugins, _ := doc["plugins"].(map[string]any)
	for _, name := range []string{"io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri"} {
		cri, ok := plugins[name].(map[string]any)
		if !ok {
			continue
		}
		if v, _ := cri["systemd_cgroup"].(bool); v {
			return "systemd", nil
		}
		ctrd, _ := cri["containerd"].(map[string]any)
		def, _ := ctrd["default_runtime_name"].(string)
		if def == "" {
			def = "runc"
		}
		runtimes, _ := ctrd["runtimes"].(map[string]any)
		rt, _ := runtimes[def].(map[string]any)
		opts, _ := rt["options"].(map[string]any)
		if v, _ := opts["SystemdCgroup"].(bool); v {
			return "systemd", nil
		}
		return "cgroupfs", nil
	}
	return "cgroupfs", nil
}
