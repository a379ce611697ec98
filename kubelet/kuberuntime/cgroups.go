package kuberuntime

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podspec"
)

// cgroupV1Root is where cgroup v1 controller hierarchies are mounted.
const cgroupV1Root = "/sys/fs/cgroup"

// qosCgroup is the pod cgroup path below CgroupRoot as the kubelet lays it out with cgroups-per-qos:
// kubepods/pod<uid> for Guaranteed, kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>.
func qosCgroup(uid types.UID, class v1.PodQOSClass) []string {
	parts := []string{"kubepods"}
	switch class {
	case v1.PodQOSBurstable:
		parts = append(parts, "burstable")
	case v1.PodQOSBestEffort:
		parts = append(parts, "besteffort")
	}
	return append(parts, "pod"+string(uid))
}

// CgroupParent returns the sandbox's cgroup parent: for cgroupfs "<root>/kubepods/burstable/pod<uid>",
// for systemd the slice name "kubepods-burstable-pod<uid with _>.slice" (systemd slice naming).
func (m *Manager) CgroupParent(pod *v1.Pod) string {
	parts := qosCgroup(pod.UID, podspec.QOSClass(pod))
	if m.opts.CgroupDriver == "systemd" {
		parts[len(parts)-1] = strings.ReplaceAll(parts[len(parts)-1], "-", "_")
		return strings.Join(parts, "-") + ".slice"
	}
	return path.Join(append([]string{"/", m.opts.CgroupRoot}, parts...)...)
}

// removePodCgroups removes the pod's (empty) cgroup directory from every cgroup v1 controller hierarchy
// (cgroupfs driver); runc creates the parents when it starts the sandbox but never removes them. Missing
// directories are fine; a non-empty one (a process still in it) is an error.
func (m *Manager) removePodCgroups(uid types.UID) error {
	if m.opts.CgroupDriver != "cgroupfs" {
		return nil
	}
	ctrls, err := os.ReadDir(cgroupV1Root)
	if err != nil {
		return nil
	}
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		rel := path.Join(append([]string{"/", m.opts.CgroupRoot}, qosCgroup(uid, class)...)...)
		for _, c := range ctrls {
			if !c.IsDir() {
				continue
			}
			dir := filepath.Join(cgroupV1Root, c.Name(), rel)
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
