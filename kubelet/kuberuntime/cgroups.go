package kuberuntime

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/cgroups"
)

// podCgroup is the pod's cgroup name below --cgroup-root (see package cgroups for the layout).
func (m *Manager) podCgroup(uid types.UID, class v1.PodQOSClass) cgroups.Name {
	return cgroups.Pod(cgroups.ParseRoot(m.opts.CgroupDriver, m.opts.CgroupRoot), uid, class)
}

// CgroupParent returns the sandbox's cgroup parent, the pod cgroup's path for the driver: for cgroupfs
// "<root>/kubepods/burstable/pod<uid>", for systemd the expanded slice path
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice" (containerd uses
// its last slice for runc's "slice:cri-containerd:<id>" cgroupsPath).
func (m *Manager) CgroupParent(pod *v1.Pod) string {
	driver := m.opts.CgroupDriver
	if driver == "" {
		driver = cgroups.Cgroupfs
	}
	return m.podCgroup(pod.UID, podspec.QOSClass(pod)).Path(driver)
}

// ensurePodCgroup creates the pod's QoS cgroups (besteffort at cgroups.MinShares, as upstream's QoS
// manager) and its pod cgroup sized by cgroups.ForPod, before its sandbox starts in it.
func (m *Manager) ensurePodCgroup(ctx context.Context, pod *v1.Pod) error {
	if m.cg == nil {
		return nil
	}
	root := cgroups.ParseRoot(m.opts.CgroupDriver, m.opts.CgroupRoot)
	class := podspec.QOSClass(pod)
	if err := m.cg.Ensure(ctx, cgroups.Kubepods(root), cgroups.Resources{}); err != nil {
		return fmt.Errorf("pod %s/%s: QoS cgroup: %w", pod.Namespace, pod.Name, err)
	}
	if class != v1.PodQOSGuaranteed {
		r := cgroups.Resources{}
		if class == v1.PodQOSBestEffort {
			r = cgroups.ForBestEffort()
		}
		if err := m.cg.Ensure(ctx, cgroups.QOS(root, class), r); err != nil {
			return fmt.Errorf("pod %s/%s: QoS cgroup: %w", pod.Namespace, pod.Name, err)
		}
	}
	if err := m.cg.Ensure(ctx, cgroups.Pod(root, pod.UID, class), cgroups.ForPod(pod)); err != nil {
		return fmt.Errorf("pod %s/%s: pod cgroup: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// removePodCgroups removes the pod's (empty) cgroup of every QoS class (its class may be unknown here):
// from every cgroup v1 controller hierarchy or the v2 tree with cgroupfs, by stopping its slice with
// systemd. runc removes the containers' cgroups but never the parents. Missing cgroups are fine; a
// non-empty one (a process still in it) is an error.
func (m *Manager) removePodCgroups(ctx context.Context, uid types.UID) error {
	if m.cg == nil {
		return nil
	}
	var errs []error
	for _, class := range cgroups.Classes {
		if err := m.cg.Remove(ctx, m.podCgroup(uid, class)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PodCgroupStats reads the CPU and memory usage of the pod's cgroup (whichever QoS class holds it), for
// /stats/summary. ok is false when the manager does not manage cgroups or no pod cgroup is found.
func (m *Manager) PodCgroupStats(uid types.UID) (s cgroups.Stats, ok bool) {
	if m.cg == nil {
		return s, false
	}
	for _, class := range cgroups.Classes {
		n := m.podCgroup(uid, class)
		if !m.cg.Exists(n) {
			continue
		}
		s, err := m.cg.Stats(n)
		return s, err == nil
	}
	return s, false
}
