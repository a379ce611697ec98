// Package cgroups lays out and sizes the kubelet's pod and QoS cgroups on cgroup v1 and v2 hosts, with
// either cgroup driver, and reads their CPU and memory usage.
//
// The layout is upstream's cgroups-per-qos tree below --cgroup-root: kubepods (Guaranteed pods),
// kubepods/burstable and kubepods/besteffort, and one pod<uid> cgroup per pod. The cgroupfs driver
// names these as directories (/kubepods/burstable/pod<uid>); the systemd driver as nested slices
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with - as _>.slice), created
// through systemd's D-Bus API as transient units, as runc's and upstream's systemd managers do.
package cgroups

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Driver names, as KubeletConfiguration cgroupDriver and CRI RuntimeConfig spell them.
const (
	Cgroupfs = "cgroupfs"
	Systemd  = "systemd"
)

// DefaultMount is where the cgroup hierarchy (v2) or the v1 controller hierarchies are mounted.
const DefaultMount = "/sys/fs/cgroup"

// IsV2 reports whether mount holds the unified cgroup v2 hierarchy (its root has cgroup.controllers);
// false means cgroup v1 (one directory per controller hierarchy below mount).
func IsV2(mount string) bool {
	_, err := os.Stat(filepath.Join(mount, "cgroup.controllers"))
	return err == nil
}

// Name is a cgroup's name as its components below the hierarchy's root, upstream's CgroupName:
// {"kubepods", "burstable", "pod<uid>"}. The driver turns it into a path (see Path).
type Name []string

// ParseRoot turns --cgroup-root into a Name: for cgroupfs the path's components ("/a/b" → {a, b}); for
// systemd a slice name or path whose last slice names the whole chain ("/a.slice/a-b.slice" or
// "a-b.slice" → {a, b}; "_" in a component stands for "-"). "" and "/" are the root (an empty Name).
func ParseRoot(driver, root string) Name {
	root = path.Clean("/" + root)
	if root == "/" {
		return nil
	}
	if driver != Systemd {
		return strings.Split(strings.TrimPrefix(root, "/"), "/")
	}
	base := strings.TrimSuffix(path.Base(root), ".slice")
	parts := strings.Split(base, "-")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "_", "-")
	}
	return parts
}

// Path is the cgroup's path below the mount (and below each v1 controller's directory), always with a
// leading "/": for cgroupfs the components joined ("/kubepods/burstable/pod<uid>"); for systemd the
// expanded slice chain with "-" in components escaped as "_", as upstream's CgroupName.ToSystemd.
func (n Name) Path(driver string) string {
	if driver != Systemd {
		return "/" + strings.Join(n, "/")
	}
	if len(n) == 0 {
		return "/"
	}
	units := make([]string, len(n))
	prefix := ""
	for i, p := range n {
		prefix += strings.ReplaceAll(p, "-", "_")
		units[i] = prefix + ".slice"
		prefix += "-"
	}
	return "/" + strings.Join(units, "/")
}

// unit is the systemd unit name of the cgroup (its last slice), "-.slice" for the root.
func (n Name) unit() string {
	p := n.Path(Systemd)
	if p == "/" {
		return "-.slice"
	}
	return path.Base(p)
}

// child returns n with more components appended (n itself is not modified).
func (n Name) child(parts ...string) Name {
	return append(append(Name{}, n...), parts...)
}

// Kubepods is the cgroup of every pod below root, holding the Guaranteed pods.
func Kubepods(root Name) Name { return root.child("kubepods") }

// QOS is the cgroup of the pods of a QoS class: kubepods for Guaranteed, kubepods/burstable and
// kubepods/besteffort.
func QOS(root Name, class v1.PodQOSClass) Name {
	switch class {
	case v1.PodQOSBurstable:
		return Kubepods(root).child("burstable")
	case v1.PodQOSBestEffort:
		return Kubepods(root).child("besteffort")
	}
	return Kubepods(root)
}

// Pod is the pod's cgroup, pod<uid> below its QoS class's cgroup.
func Pod(root Name, uid types.UID, class v1.PodQOSClass) Name {
	return QOS(root, class).child("pod" + string(uid))
}

// Classes are the QoS classes in the order their cgroups are searched for a pod whose class is unknown.
var Classes = []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort}
