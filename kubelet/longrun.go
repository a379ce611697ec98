package kubelet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/eviction"
	"github.com/nodekit/nodekit/kubelet/imagegc"
	"github.com/nodekit/nodekit/kubelet/logs"
	"github.com/nodekit/nodekit/kubelet/podworkers"
)

// What keeps a long-running node healthy: container log rotation (kubelet/logs), image garbage
// collection (kubelet/imagegc) and the eviction manager (kubelet/eviction), with the hooks the
// eviction manager uses (ActivePods, EvictPod, PodCleanedUp) and the pressure conditions it reports.

// startNodeManagers starts the log rotation, image GC and eviction loops; they stop when ctx ends, and
// the returned WaitGroup is done once they all returned.
func (k *Kubelet) startNodeManagers(ctx context.Context, recorder record.EventRecorder) (*sync.WaitGroup, error) {
	var wg sync.WaitGroup
	lm, err := logs.New(k.cfg.Runtime, k.cfg.ContainerLogs, k.log)
	if err != nil {
		return nil, err
	}
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
	gc, err := imagegc.New(imagegc.Config{Runtime: k.cfg.Runtime, Images: k.cfg.Images, Policy: k.cfg.ImageGC,
		Recorder: recorder, Node: nodeRef, PinnedImages: k.cfg.PinnedImages, Logger: k.log})
	if err != nil {
		return nil, err
	}
	var em *eviction.Manager
	if len(k.cfg.EvictionThresholds) > 0 {
		em, err = eviction.New(eviction.Config{
			Thresholds: k.cfg.EvictionThresholds, PressureTransitionPeriod: k.cfg.EvictionPressureTransitionPeriod,
			MaxPodGracePeriodSeconds: k.cfg.EvictionMaxPodGracePeriod, Pods: k, Runtime: k.cfg.Runtime,
			Recorder: recorder, NodeName: k.cfg.NodeName, RootDir: k.cfg.RootDir, PodLogsDir: k.cfg.PodLogsDir,
			ImageFs: func(ctx context.Context) (uint64, uint64, uint64, uint64, error) {
				fs, err := imagegc.ImageFs(ctx, k.cfg.Images)
				return fs.Capacity, fs.Available, fs.InodesTotal, fs.InodesFree, err
			},
			ReclaimImages: gc.DeleteUnusedImages, Logger: k.log,
		})
		if err != nil {
			return nil, err
		}
		k.eviction.Store(em)
	}
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { lm.Run(ctx, k.cfg.ContainerLogMonitorInterval) })
	run(func() { gc.Run(ctx, k.cfg.ImageGCPeriod) })
	if em != nil {
		run(func() { em.Run(ctx, k.cfg.EvictionMonitoringInterval) })
	}
	return &wg, nil
}

// IsUnderMemoryPressure reports the node's MemoryPressure condition (false without eviction thresholds
// or before Run started).
func (k *Kubelet) IsUnderMemoryPressure() bool { return k.eviction.Load().IsUnderMemoryPressure() }

// IsUnderDiskPressure reports the node's DiskPressure condition.
func (k *Kubelet) IsUnderDiskPressure() bool { return k.eviction.Load().IsUnderDiskPressure() }

// IsUnderPIDPressure reports the node's PIDPressure condition.
func (k *Kubelet) IsUnderPIDPressure() bool { return k.eviction.Load().IsUnderPIDPressure() }

// ActivePods returns the pods whose containers may run: desired, not terminal, not deleted, and whose
// worker is still syncing them (eviction.Pods).
func (k *Kubelet) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.Pods() {
		if podspec.IsTerminal(p.Status.Phase) || p.DeletionTimestamp != nil || k.hasFailed(p.UID) {
			continue
		}
		if st, ok := k.workers.State(p.UID); ok && st != podworkers.Syncing {
			continue
		}
		out = append(out, p)
	}
	return out
}

// podFailure is why the kubelet failed a pod: the status reason and message it gets.
type podFailure struct{ reason, message string }

// EvictPod kills the pod within gracePeriodSeconds; its status becomes phase Failed, reason Evicted
// and message (eviction.Pods). The pod object stays, as upstream's evicted pods do.
func (k *Kubelet) EvictPod(pod *v1.Pod, gracePeriodSeconds int64, message string) {
	k.mu.Lock()
	k.failed[pod.UID] = podFailure{reason: eviction.Reason, message: message}
	desired := k.pods[pod.UID]
	k.mu.Unlock()
	if desired == nil {
		return
	}
	k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: desired, Kill: true, GracePeriod: &gracePeriodSeconds})
}

// rejectPod records that the kubelet refuses to run pod (upstream's admission rejection): its status
// becomes phase Failed with reason and message, and its worker terminates it.
func (k *Kubelet) rejectPod(pod *v1.Pod, reason, message string) {
	k.mu.Lock()
	_, known := k.failed[pod.UID]
	k.failed[pod.UID] = podFailure{reason: reason, message: message}
	k.mu.Unlock()
	if !known {
		k.recorder.Event(pod, v1.EventTypeWarning, reason, message)
		k.log.Info("pod rejected", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "reason", reason, "message", message)
	}
}

// PodCleanedUp reports whether the pod's worker has stopped all of its containers.
func (k *Kubelet) PodCleanedUp(uid types.UID) bool {
	st, ok := k.workers.State(uid)
	return !ok || st == podworkers.Terminated
}

// failure is why the kubelet failed the pod (evicted or rejected); ok false when it did not.
func (k *Kubelet) failure(uid types.UID) (podFailure, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	f, ok := k.failed[uid]
	return f, ok
}

// hasFailed reports whether the kubelet evicted or rejected the pod.
func (k *Kubelet) hasFailed(uid types.UID) bool { _, ok := k.failure(uid); return ok }

// markFailed applies an eviction or rejection to a status being generated: old's phase Failed (so the
// generated conditions are those of a finished pod), then reason and message on s. It reports whether
// the kubelet failed the pod.
func (k *Kubelet) markFailed(uid types.UID, old, s *v1.PodStatus) bool {
	f, ok := k.failure(uid)
	if !ok {
		return false
	}
	if old != nil {
		old.Phase = v1.PodFailed
	}
	if s != nil {
		s.Phase, s.Reason, s.Message = v1.PodFailed, f.reason, f.message
	}
	return true
}
