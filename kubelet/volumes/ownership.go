package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// The permission bits fsGroup ownership adds, as upstream's SetVolumeOwnership
// (pkg/volume/volume_linux.go): read for the group on read-only volumes (configMap, secret,
// downwardAPI, projected), read-write on writable ones (emptyDir), search on directories.
const (
	roMask   os.FileMode = 0o440
	rwMask   os.FileMode = 0o660
	execMask os.FileMode = 0o110
)

// fsGroup is the pod's securityContext.fsGroup, nil when unset.
func fsGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// groupMode is the mode a file of mode m gets in a volume owned by an fsGroup: m plus the group's
// read bits (roMask; rwMask on writable volumes).
func groupMode(m os.FileMode, readOnly bool) os.FileMode {
	if readOnly {
		return m | roMask
	}
	return m | rwMask
}

// setOwnership gives everything under dir (dir included; symlinks are not followed, only their own
// group changes) the group gid, and adds the group's bits (groupMode) to every file and directory;
// directories also get the group's search bits and setgid, so that files created in them later belong
// to gid too. This is upstream's SetVolumeOwnership with fsGroupChangePolicy Always.
func setOwnership(dir string, gid int64, readOnly bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := groupMode(info.Mode(), readOnly)
		if d.IsDir() {
			mode |= os.ModeSetgid | execMask
		}
		return os.Chmod(p, mode)
	})
}

// hasGroup reports whether info's file belongs to group gid (always true for gid nil).
func hasGroup(info fs.FileInfo, gid *int64) bool {
	if gid == nil {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int64(st.Gid) == *gid
}
