package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/nodekit/nodekit/runtime/cri"
)

// cgroupDriverSource is where the runtime's cgroup driver was learnt.
type cgroupDriverSource struct {
	driver, from string
}

// runtimeCgroupDriver asks the runtime for its cgroup driver: CRI RuntimeConfig (containerd >= 2.0),
// else, when the runtime answers Unimplemented (containerd 1.x), the SystemdCgroup option of its
// config file (readConfig, e.g. containerd.ConfigCgroupDriver of /etc/containerd/config.toml or the
// managed containerd's generated config). ok is false when neither tells (no such file); other
// failures are errors.
func runtimeCgroupDriver(ctx context.Context, fromCRI func(context.Context) (string, error),
	configPath string, readConfig func(string) (string, error)) (src cgroupDriverSource, ok bool, err error) {
	d, err := fromCRI(ctx)
	if err == nil {
		return cgroupDriverSource{d, "CRI RuntimeConfig"}, true, nil
	}
	if !errors.Is(err, cri.ErrRuntimeConfigUnimplemented) {
		return src, false, fmt.Errorf("cgroup driver: %w", err)
	}
	d, err = readConfig(configPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return src, false, nil
	case err != nil:
		return src, false, fmt.Errorf("cgroup driver: %w", err)
	}
	return cgroupDriverSource{d, configPath + " (SystemdCgroup)"}, true, nil
}

// decideCgroupDriver picks the kubelet's cgroup driver: the runtime's when it tells (known), which an
// explicitly configured one (--cgroup-driver / KubeletConfiguration cgroupDriver, "" when unset) must
// match; otherwise the configured one, "cgroupfs" by default (upstream's default).
func decideCgroupDriver(configured string, rt cgroupDriverSource, known bool) (string, error) {
	switch {
	case !known && configured == "":
		return "cgroupfs", nil
	case !known:
		return configured, nil
	case configured != "" && configured != rt.driver:
		return "", fmt.Errorf("cgroupDriver: %q (--cgroup-driver or KubeletConfiguration) does not match the container runtime's cgroup driver %q (from %s): set --cgroup-driver=%s, or leave it unset to follow the runtime, or change the runtime's SystemdCgroup option",
			configured, rt.driver, rt.from, rt.driver)
	}
	return rt.driver, nil
}
