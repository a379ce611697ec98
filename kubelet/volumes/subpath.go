package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// subPathsDir is <pod dir>/volume-subpaths, upstream's directory for subPath bind mounts.
const subPathsDir = "volume-subpaths"

// ErrSubPathEscapes is the error of a subPath that resolves outside its volume.
var ErrSubPathEscapes = errors.New("resolves outside the volume")

// resolveBeneath is how subPaths are resolved: never above the volume's root (a symlink or ".." that
// leaves it fails with EXDEV) and never through /proc magic links.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// SubPath makes the subPath sub of a volume mounted at root safe to hand to the container runtime, as
// upstream's safe subPath handling (CVE-2017-1002101): it resolves sub below root with openat2
// RESOLVE_BENEATH (symlinks inside the volume are followed, any that leaves it is refused), creating
// missing directories one at a time the same way, and bind-mounts the opened file or directory (through
// /proc/self/fd, so a symlink swapped in after the check changes nothing) on
// <pod dir>/volume-subpaths/<volume>/<container>/<index>, which it returns. An existing bind mount there
// (a restarted container) is replaced. sub must be relative without ".." components; an escape is an
// error wrapping ErrSubPathEscapes and nothing is mounted. TearDownPod unmounts these mounts.
func (m *Manager) SubPath(uid types.UID, volume, container string, index int, root, sub string) (string, error) {
	clean := filepath.Clean(sub)
	if filepath.IsAbs(sub) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("subPath %q must be a relative path without '..'", sub)
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open volume root %s: %w", root, err)
	}
	defer unix.Close(rootFd)
	fd, err := openBeneath(rootFd, clean)
	if errors.Is(err, unix.ENOENT) {
		if err = mkdirBeneath(rootFd, clean); err == nil {
			fd, err = openBeneath(rootFd, clean)
		}
	}
	if err != nil {
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
			return "", fmt.Errorf("subPath %q %w %q: a symlink or '..' in it leads out (%v)", sub, ErrSubPathEscapes, volume, err)
		}
		return "", fmt.Errorf("subPath %q of volume %q: %w", sub, volume, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("subPath %q of volume %q: %w", sub, volume, err)
	}
	target := filepath.Join(m.PodDir(uid), subPathsDir, volume, container, strconv.Itoa(index))
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", err
	}
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("unmount stale subPath mount %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(target, 0o750)
	} else {
		var f *os.File
		if f, err = os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return "", err
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), target, "", unix.MS_BIND, ""); err != nil {
		os.Remove(target)
		return "", fmt.Errorf("bind-mount subPath %q of volume %q: %w", sub, volume, err)
	}
	return target, nil
}

func openBeneath(dirFd int, path string) (int, error) {
	for {
		fd, err := unix.Openat2(dirFd, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveBeneath})
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// mkdirBeneath creates the missing directories of path below dirFd, each resolved beneath dirFd.
func mkdirBeneath(dirFd int, path string) error {
	parts := strings.Split(path, "/")
	for i := range parts {
		parent := "."
		if i > 0 {
			parent = strings.Join(parts[:i], "/")
		}
		pfd, err := openBeneath(dirFd, parent)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(pfd, parts[i], 0o750)
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// tearDownSubPaths unmounts the pod's subPath bind mounts and removes <pod dir>/volume-subpaths.
func (m *Manager) tearDownSubPaths(uid types.UID) error {
	return unmountAndRemove(filepath.Join(m.PodDir(uid), subPathsDir))
}
