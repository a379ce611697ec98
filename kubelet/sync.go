package kubelet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/kuberuntime"
	"github.com/nodekit/nodekit/kubelet/podworkers"
	"github.com/nodekit/nodekit/kubelet/status"
	"github.com/nodekit/nodekit/kubelet/sysctl"
)

// The pod worker steps (podworkers.Syncer) and the runtime manager's helper (kuberuntime.RuntimeHelper).

// generateStatus reads the pod's runtime state and computes its API status.
func (k *Kubelet) generateStatus(ctx context.Context, pod *v1.Pod, terminal bool) (v1.PodStatus, *kuberuntime.PodStatus, error) {
	rs, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return v1.PodStatus{}, nil, err
	}
	old, ok := k.status.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	if api := k.apiPod(pod.UID); api != nil {
		// Conditions others own (readiness gates, DisruptionTarget, ...) as the API has them now.
		old.Conditions = status.MergeConditions(old.Conditions, api.Status.Conditions)
	}
	failed := k.markFailed(pod.UID, &old, nil)
	s := status.Generate(status.Input{
		Pod: pod, Old: old, Runtime: rs, HostIPs: k.hostIPs(ctx), Terminal: terminal, Now: time.Now(),
		Waiting: func(name string) (kuberuntime.Waiting, bool) { return k.runtime.WaitingReason(pod.UID, name) },
		Probe:   func(s *v1.PodStatus) { k.prober.UpdatePodStatus(pod, s) },
	})
	if failed {
		k.markFailed(pod.UID, nil, &s)
	}
	return s, rs, nil
}

// setStatus writes the status of a desired pod (orphans have no API object to write to).
func (k *Kubelet) setStatus(ctx context.Context, pod *v1.Pod, s v1.PodStatus) error {
	desired := k.desiredPod(pod.UID)
	if desired == nil {
		return nil
	}
	return k.status.SetPodStatus(ctx, desired, s)
}

// apiPod returns the API's copy of the desired pod uid as the pod watch last delivered it (a static
// pod's mirror pod), or nil when there is none.
func (k *Kubelet) apiPod(uid types.UID) *v1.Pod {
	p := k.desiredPod(uid)
	if p == nil {
		return nil
	}
	if !status.IsStatic(p) {
		return p
	}
	if k.apiPods == nil {
		return nil
	}
	mirror, err := k.apiPods.Pods(p.Namespace).Get(p.Name)
	if err != nil || mirror.Annotations[status.ConfigMirrorAnnotation] == "" {
		return nil
	}
	return mirror
}

// failPod fails pod with reason and message (rejectPod) and writes its terminal status.
func (k *Kubelet) failPod(ctx context.Context, pod *v1.Pod, reason, message string) (podworkers.SyncResult, error) {
	k.rejectPod(pod, reason, message)
	s, _, err := k.generateStatus(ctx, pod, true)
	if err != nil {
		return podworkers.SyncResult{}, err
	}
	return podworkers.SyncResult{Terminal: true}, k.setStatus(ctx, pod, s)
}

// SyncPod is the pod worker's sync step: set up volumes, converge containers through the runtime
// manager, then write the status read back from the runtime. A pod whose phase is (or becomes)
// Succeeded or Failed is reported terminal and never started again.
func (k *Kubelet) SyncPod(ctx context.Context, pod *v1.Pod) (podworkers.SyncResult, error) {
	if podspec.IsTerminal(pod.Status.Phase) {
		return podworkers.SyncResult{Terminal: true}, nil
	}
	// Rejected before anything of it runs (upstream's sysctl and NodePorts admission): the status is
	// Failed, and the worker's termination stops whatever an earlier kubelet may have started.
	if msg := k.sysctls.Admit(pod); msg != "" {
		return k.failPod(ctx, pod, sysctl.ForbiddenReason, msg)
	}
	if !k.admitHostPorts(pod) {
		return k.failPod(ctx, pod, NodePortsReason, nodePortsMessage)
	}
	deadlineLeft, exceeded := activeDeadline(pod, time.Now())
	if exceeded {
		// upstream's activeDeadlineHandler: the pod fails, and the worker's termination kills it.
		return k.failPod(ctx, pod, DeadlineExceededReason, "Pod was active on the node longer than the specified deadline")
	}
	begin := time.Now()
	defer k.starts.observeSync(pod.UID, begin)
	k.log.Debug("sync pod", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)
	k.addToProber(pod)
	s, rs, err := k.generateStatus(ctx, pod, false)
	if err != nil {
		return podworkers.SyncResult{}, err
	}
	if podspec.IsTerminal(s.Phase) {
		return podworkers.SyncResult{Terminal: true}, k.setStatus(ctx, pod, s)
	}
	volBegin := time.Now()
	paths, err := k.volumes.SetUpPod(ctx, pod)
	k.log.Debug("volumes set up", "pod", pod.Namespace+"/"+pod.Name, "took", time.Since(volBegin), "err", err)
	k.mu.Lock()
	k.volPaths[pod.UID] = paths
	k.mu.Unlock()
	if err != nil {
		k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
		return podworkers.SyncResult{}, errors.Join(err, k.setStatus(ctx, pod, s))
	}
	res := k.runtime.SyncPod(ctx, pod, rs, k.unhealthyFunc)
	if res.Changed {
		if s, rs, err = k.generateStatus(ctx, pod, false); err != nil {
			return podworkers.SyncResult{RequeueAfter: res.RequeueAfter}, errors.Join(res.Err, err)
		}
	}
	k.forgetUnhealthy(rs)
	k.starts.running(pod, &s, time.Now())
	werr := k.setStatus(ctx, pod, s)
	requeue := res.RequeueAfter
	if deadlineLeft > 0 && (requeue <= 0 || deadlineLeft < requeue) {
		requeue = deadlineLeft // the sync that fails the pod at its deadline
	}
	return podworkers.SyncResult{Terminal: podspec.IsTerminal(s.Phase), RequeueAfter: requeue}, errors.Join(res.Err, werr)
}

// DeadlineExceededReason is the status reason of a pod failed at spec.activeDeadlineSeconds.
const DeadlineExceededReason = "DeadlineExceeded"

// activeDeadline reports how long pod may still be active (0: it has no deadline, or no start time
// yet) and whether it has been active on the node for longer than spec.activeDeadlineSeconds, counted
// from status.startTime, as upstream's kubelet does.
func activeDeadline(pod *v1.Pod, now time.Time) (time.Duration, bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Status.StartTime == nil {
		return 0, false
	}
	left := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second).Sub(now)
	if left <= 0 {
		return 0, true
	}
	return left, false
}

// forgetUnhealthy drops probe failures of container instances that no longer run.
func (k *Kubelet) forgetUnhealthy(rs *kuberuntime.PodStatus) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.unhealthy) == 0 {
		return
	}
	for _, c := range rs.ContainerStatuses {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			delete(k.unhealthy, c.ContainerID())
		}
	}
}

// addToProber hands the pod to the ProbeManager on its first sync.
func (k *Kubelet) addToProber(pod *v1.Pod) {
	k.mu.Lock()
	seen := k.probed[pod.UID]
	k.probed[pod.UID] = true
	k.mu.Unlock()
	if !seen {
		k.prober.AddPod(pod)
	}
}

// removeFromProber stops the pod's probes once (after termination).
func (k *Kubelet) removeFromProber(pod *v1.Pod) {
	k.mu.Lock()
	seen := k.probed[pod.UID]
	delete(k.probed, pod.UID)
	k.mu.Unlock()
	if seen {
		k.prober.RemovePod(pod)
	}
}

// SyncTerminatingPod stops the pod's containers (preStop hooks, then StopContainer with the grace
// period) and its sandbox, and writes the resulting status.
func (k *Kubelet) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, gracePeriod int64) error {
	k.log.Info("terminating pod", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "gracePeriod", gracePeriod)
	// Status first, as upstream: the probe manager learns of the deletion through UpdatePodStatus (and
	// stops liveness and startup probes) before the containers get their stop signal.
	before, rs, err := k.generateStatus(ctx, pod, false)
	if err != nil {
		return err
	}
	if err := k.setStatus(ctx, pod, before); err != nil {
		k.log.Warn("status before termination", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	if err := k.runtime.KillPod(ctx, pod, rs, &gracePeriod); err != nil {
		return err
	}
	s, _, err := k.generateStatus(ctx, pod, true)
	if err != nil {
		return err
	}
	return k.setStatus(ctx, pod, s)
}

// SyncTerminatedPod releases the stopped pod's volumes and cgroups, writes its final status and, when it
// was deleted, deletes the API object.
func (k *Kubelet) SyncTerminatedPod(ctx context.Context, pod *v1.Pod) error {
	k.removeFromProber(pod)
	if err := k.volumes.TearDownPod(pod.UID); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if err := k.runtime.CleanupPod(ctx, pod.UID); err != nil {
		k.log.Debug("pod cgroups not removed yet", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	s, _, err := k.generateStatus(ctx, pod, true)
	if err != nil {
		return err
	}
	if err := k.setStatus(ctx, pod, s); err != nil {
		return err
	}
	if cur := k.desiredPod(pod.UID); cur != nil && cur.DeletionTimestamp != nil {
		return k.status.FinishDeletion(ctx, cur)
	}
	return nil
}

// SyncRemovedPod removes the containers, sandboxes, logs and directories of a pod no source has.
func (k *Kubelet) SyncRemovedPod(ctx context.Context, pod *v1.Pod) error {
	if err := k.runtime.RemovePod(ctx, pod); err != nil {
		return err
	}
	if err := k.volumes.RemovePodDir(pod.UID); err != nil {
		return err
	}
	k.status.RemovePod(pod.UID)
	k.starts.forget(pod.UID)
	k.mu.Lock()
	delete(k.volPaths, pod.UID)
	delete(k.failed, pod.UID)
	k.mu.Unlock()
	return nil
}

// GenerateRunContainerOptions resolves env and mounts for container c (kuberuntime.RuntimeHelper). The
// downward API sees the pod with its current pod and host IPs.
func (k *Kubelet) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) (*kuberuntime.RunContainerOptions, error) {
	p := pod.DeepCopy()
	hosts := k.hostIPs(ctx)
	if pod.Spec.HostNetwork && len(podIPs) == 0 {
		podIPs = hosts // status.podIP(s) of a hostNetwork pod are the node's addresses
	}
	p.Status.PodIPs = nil
	for _, ip := range podIPs {
		p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
	}
	if len(podIPs) > 0 {
		p.Status.PodIP = podIPs[0]
	}
	p.Status.HostIPs = nil
	for _, ip := range hosts {
		p.Status.HostIPs = append(p.Status.HostIPs, v1.HostIP{IP: ip})
	}
	if len(hosts) > 0 {
		p.Status.HostIP = hosts[0]
	}
	env, err := k.makeEnv(ctx, p, c)
	if err != nil {
		return nil, err
	}
	k.mu.RLock()
	paths := k.volPaths[pod.UID]
	k.mu.RUnlock()
	mounts, err := k.makeMounts(p, c, paths, env, podIPs)
	if err != nil {
		return nil, err
	}
	return &kuberuntime.RunContainerOptions{Envs: env, Mounts: mounts}, nil
}

// podContainerDir is <pod dir>/containers/<container> (upstream's layout): the host directory of the
// container's termination message files, removed with the pod directory.
func (k *Kubelet) podContainerDir(uid types.UID, container string) string {
	return filepath.Join(k.volumes.PodDir(uid), "containers", container)
}

// GetPullSecrets returns the pod's imagePullSecrets that exist (kuberuntime.RuntimeHelper).
func (k *Kubelet) GetPullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	var out []v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := k.objects.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			k.log.Warn("image pull secret unavailable", "pod", pod.Namespace+"/"+pod.Name, "secret", ref.Name, "err", err)
			continue
		}
		out = append(out, *s)
	}
	return out
}
