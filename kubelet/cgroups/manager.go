package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// v1Controllers are the cgroup v1 hierarchies the kubelet creates pod and QoS cgroups in (runc creates
// the pod's directory in the others when it starts the sandbox).
var v1Controllers = []string{"cpu", "cpuacct", "memory", "pids"}

// Manager creates, sizes, removes and reads cgroups of one hierarchy with one driver. It is safe for
// concurrent use.
type Manager struct {
	mount  string
	driver string
	v2     bool
	sd     *systemdConn // systemd driver only
}

// New returns a Manager for the hierarchy at mount (DefaultMount on a host; a fake tree in tests) and
// driver (Cgroupfs or Systemd). The version is read from mount (IsV2). The systemd driver connects to
// systemd's D-Bus API on first use.
func New(mount, driver string) (*Manager, error) {
	if driver != Cgroupfs && driver != Systemd {
		return nil, fmt.Errorf("cgroup driver %q is not cgroupfs or systemd", driver)
	}
	m := &Manager{mount: mount, driver: driver, v2: IsV2(mount)}
	if driver == Systemd {
		m.sd = &systemdConn{}
	}
	return m, nil
}

// Driver is the manager's cgroup driver.
func (m *Manager) Driver() string { return m.driver }

// V2 reports whether the hierarchy is cgroup v2.
func (m *Manager) V2() bool { return m.v2 }

// Dir is the cgroup's directory: below the mount on v2, below the mount's controller directory (e.g.
// "memory") on v1.
func (m *Manager) Dir(controller string, n Name) string {
	if m.v2 {
		controller = ""
	}
	return filepath.Join(m.mount, controller, n.Path(m.driver))
}

// Exists reports whether the cgroup's directory exists (on v1: in the memory hierarchy).
func (m *Manager) Exists(n Name) bool {
	_, err := os.Stat(m.Dir("memory", n))
	return err == nil
}

// Ensure creates the cgroup if it does not exist and applies r. With cgroupfs it creates the directory
// and its parents (v1: in the cpu, cpuacct, memory and pids hierarchies; v2: enabling the parents'
// available controllers in cgroup.subtree_control on the way down) and writes the limit files; with
// systemd it starts the slice as a transient unit (parents are implied by the slice name) or, when it
// exists, sets the unit's properties. Errors name the cgroup and the file or unit.
func (m *Manager) Ensure(ctx context.Context, n Name, r Resources) error {
	if m.driver == Systemd {
		return m.sd.ensure(ctx, n.unit(), systemdProperties(m.v2, r))
	}
	if m.v2 {
		return m.ensureV2(n, r)
	}
	return m.ensureV1(n, r)
}

func (m *Manager) ensureV1(n Name, r Resources) error {
	for _, c := range v1Controllers {
		if _, err := os.Stat(filepath.Join(m.mount, c)); err != nil {
			continue // controller not mounted
		}
		if err := os.MkdirAll(m.Dir(c, n), 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", n.Path(m.driver), err)
		}
	}
	var files []limitFile
	if r.CPUShares != nil {
		files = append(files, limitFile{"cpu", "cpu.shares", strconv.FormatUint(*r.CPUShares, 10)})
	}
	if r.CPUQuota != nil {
		files = append(files, limitFile{"cpu", "cpu.cfs_period_us", strconv.FormatUint(period(r), 10)},
			limitFile{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(*r.CPUQuota, 10)})
	}
	if r.Memory != nil {
		files = append(files, limitFile{"memory", "memory.limit_in_bytes", strconv.FormatInt(*r.Memory, 10)})
	}
	if r.Pids != nil {
		files = append(files, limitFile{"pids", "pids.max", maxOr(*r.Pids)})
	}
	return m.write(n, files)
}

func (m *Manager) ensureV2(n Name, r Resources) error {
	dir := m.mount
	for _, part := range strings.Split(strings.TrimPrefix(n.Path(m.driver), "/"), "/") {
		if err := enableControllers(dir); err != nil {
			return fmt.Errorf("cgroup %s: %w", n.Path(m.driver), err)
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", n.Path(m.driver), err)
		}
	}
	var files []limitFile
	if r.CPUShares != nil {
		files = append(files, limitFile{"", "cpu.weight", strconv.FormatUint(SharesToWeight(*r.CPUShares), 10)})
	}
	if r.CPUQuota != nil {
		files = append(files, limitFile{"", "cpu.max", maxOr(*r.CPUQuota) + " " + strconv.FormatUint(period(r), 10)})
	}
	if r.Memory != nil {
		files = append(files, limitFile{"", "memory.max", maxOr(*r.Memory)})
	}
	if r.Pids != nil {
		files = append(files, limitFile{"", "pids.max", maxOr(*r.Pids)})
	}
	return m.write(n, files)
}

// limitFile is one cgroup interface file to write: controller (v1 hierarchy), file name, value.
type limitFile struct{ controller, name, value string }

func (m *Manager) write(n Name, files []limitFile) error {
	for _, f := range files {
		p := filepath.Join(m.Dir(f.controller, n), f.name)
		if err := os.WriteFile(p, []byte(f.value), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: write %q to %s: %w", n.Path(m.driver), f.value, f.name, err)
		}
	}
	return nil
}

// enableControllers enables in dir's cgroup.subtree_control every controller of its cgroup.controllers
// that is not enabled yet (cgroup v2), one at a time as the kernel accepts them.
func enableControllers(dir string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	enabled := strings.Fields(string(on))
	for _, c := range strings.Fields(string(avail)) {
		if slices.Contains(enabled, c) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0o644); err != nil {
			return fmt.Errorf("enable controller %s in %s: %w", c, dir, err)
		}
	}
	return nil
}

// Remove removes the cgroup; a cgroup that does not exist is fine. With cgroupfs it removes the (empty)
// directory from every v1 hierarchy or from the v2 tree; with systemd it stops the slice unit. A cgroup
// that still has a process or a child cgroup is an error.
func (m *Manager) Remove(ctx context.Context, n Name) error {
	if m.driver == Systemd {
		if err := m.sd.stop(ctx, n.unit()); err != nil {
			return err
		}
	}
	dirs := []string{m.Dir("", n)}
	if !m.v2 {
		dirs = dirs[:0]
		ctrls, err := os.ReadDir(m.mount)
		if err != nil {
			return nil
		}
		for _, c := range ctrls {
			if c.IsDir() {
				dirs = append(dirs, m.Dir(c.Name(), n))
			}
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func period(r Resources) uint64 {
	if r.CPUPeriod != nil && *r.CPUPeriod > 0 {
		return *r.CPUPeriod
	}
	return QuotaPeriod
}

// maxOr formats a limit, "max" for Unlimited (any negative value).
func maxOr(v int64) string {
	if v < 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}
