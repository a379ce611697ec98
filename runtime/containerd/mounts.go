package containerd

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MountsUnder lists the mount points at or below dir (from /proc/self/mountinfo), deepest first.
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("reading mounts under %s: %w", dir, err)
	}
	var points []string
	for _, m := range infos {
		points = append(points, m.Mountpoint)
	}
	// Longer paths first so nested mounts go before their parents.
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(points), nil
}

// UnmountAll detaches (umount2 MNT_DETACH) every mount at or below dir, deepest first: overlay rootfs
// and shm mounts a killed containerd or shim may leave in its state directory. Errors name the mount.
func UnmountAll(dir string) error {
	points, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
