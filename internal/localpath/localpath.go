// Package localpath holds the names nodekit's local-path storage shares between the node and the
// control plane (k3s's local-path provisioner is the model): the provisioner's name, the default
// StorageClass, and the Node annotation through which a node's agent tells the provisioner where on
// that node volumes live (<agent data dir>/storage). The kubelet writes the annotation at registration;
// the PersistentVolume controller reads it when it provisions a volume on the node the scheduler chose.
package localpath

import (
	"fmt"
	"path"
	"strings"
)

const (
	// Provisioner is the StorageClass provisioner nodekit's PersistentVolume controller serves.
	Provisioner = "nodekit.io/local-path"
	// DefaultClass is the default StorageClass the local-path add-on installs (WaitForFirstConsumer,
	// reclaim Delete), named as k3s names its own.
	DefaultClass = "local-path"
	// NodeDirAnnotation on a Node is the absolute directory under which local-path volumes of that node
	// are created, one directory per PersistentVolume named after it.
	NodeDirAnnotation = "storage.nodekit.io/local-path-dir"
	// DirName is the directory under the agent's data dir that NodeDirAnnotation names.
	DirName = "storage"
)

// VolumePath is the host directory of PersistentVolume pv on a node whose NodeDirAnnotation is dir.
func VolumePath(dir, pv string) string { return path.Join(dir, pv) }

// CheckVolumePath reports whether p is the directory VolumePath gives for pv under dir: an absolute,
// clean path whose last element is pv and whose parent is dir. The provisioner deletes only such
// directories.
func CheckVolumePath(p, dir, pv string) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("local-path directory %q is not a clean absolute path below /", dir)
	}
	if pv == "" || strings.ContainsRune(pv, '/') || pv == "." || pv == ".." {
		return fmt.Errorf("volume name %q is not a path element", pv)
	}
	if p != VolumePath(dir, pv) {
		return fmt.Errorf("path %q is not %q", p, VolumePath(dir, pv))
	}
	return nil
}
