package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// FailedProbe names the probe whose failure condemns a container instance, spelled as upstream's
// Killing event spells it ("Container demo failed liveness probe, will be restarted").
type FailedProbe string

// The probes that kill a container when they fail past their failureThreshold.
const (
	LivenessProbe FailedProbe = "liveness"
	StartupProbe  FailedProbe = "startup"
)

// UnhealthyFunc reports whether the container instance (by "<runtime>://<id>") failed its liveness or
// startup probe, and which.
type UnhealthyFunc func(containerID string) (probe FailedProbe, unhealthy bool)

// podActions is what SyncPod must do to converge a pod (upstream's podActions).
type podActions struct {
	// KillPod stops every container and sandbox of the pod first.
	KillPod bool
	// CreateSandbox runs a new sandbox with metadata attempt Attempt.
	CreateSandbox bool
	Attempt       uint32
	// SandboxID is the ready sandbox to start containers in (when not creating one).
	SandboxID string
	// InitToStart, ContainersToStart and EphemeralToStart index spec.initContainers, spec.containers
	// and spec.ephemeralContainers.
	InitToStart       []int
	ContainersToStart []int
	EphemeralToStart  []int
	// ContainersToKill are running instances to stop, by CRI container ID.
	ContainersToKill map[string]killInfo
}

type killInfo struct {
	name      string
	container *v1.Container
	// message is the Killing event's text (upstream's wording, e.g. "Container demo definition changed,
	// will be restarted").
	message string
	// grace overrides the pod's grace period: a failed probe's own terminationGracePeriodSeconds.
	grace *int64
}

// probeGracePeriod is the grace period a container killed for failing probe gets instead of the pod's,
// or nil: the probe's terminationGracePeriodSeconds (Kubernetes ≥ 1.25, "Probe-level
// terminationGracePeriodSeconds"), unless the pod is being deleted, whose deletion grace period wins
// (upstream's setTerminationGracePeriod).
func probeGracePeriod(pod *v1.Pod, c *v1.Container, probe FailedProbe) *int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return nil
	}
	var p *v1.Probe
	switch probe {
	case LivenessProbe:
		p = c.LivenessProbe
	case StartupProbe:
		p = c.StartupProbe
	}
	if p == nil || p.TerminationGracePeriodSeconds == nil {
		return nil
	}
	g := *p.TerminationGracePeriodSeconds
	return &g
}

// IsRestartableInit reports whether c is a restartable init ("sidecar") container: an init container
// with restartPolicy Always (KEP-753).
func IsRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// ShouldRestart applies the pod's restartPolicy to an exited container: Always restarts, OnFailure
// restarts a non-zero exit, Never does not.
func ShouldRestart(pod *v1.Pod, st *ContainerStatus) bool {
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return st.ExitCode != 0
	}
	return true
}

func hasAppContainerStatus(pod *v1.Pod, s *PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		if s.FindContainerStatus(c.Name) != nil {
			return true
		}
	}
	return false
}

// computePodActions compares the pod spec with its runtime status.
//
//   - No ready sandbox (or its network mode changed): kill what is left and create a new sandbox, then
//     start the first init container, or all app containers when there are none — except that a
//     restartPolicy Never pod whose containers already ran is not given a new sandbox.
//   - Init containers run one at a time in order; a failed one restarts per restartPolicy (with
//     Never the pod fails). Restartable init containers are (re)started and must be running before the
//     next init container starts, and keep being restarted afterwards.
//   - Once initialized, app containers that never ran start; exited ones restart per restartPolicy;
//     running ones whose spec hash changed or that failed liveness are killed and restarted.
//   - In a ready sandbox, ephemeral containers that never ran start (initialized or not); they are
//     never restarted.
func (m *Manager) computePodActions(pod *v1.Pod, s *PodStatus, unhealthy UnhealthyFunc) podActions {
	a := podActions{ContainersToKill: map[string]killInfo{}}
	ready := s.ReadySandbox()
	if n := readySandboxes(s); n > 1 {
		// As upstream: several ready sandboxes (one whose creation was given up on, then finished, or
		// one made behind the kubelet's back) are reconciled by killing the pod and starting afresh.
		m.log.Info("several ready sandboxes for the pod, killing them and creating one", "pod", pod.Namespace+"/"+pod.Name,
			"podUID", pod.UID, "readySandboxes", n)
		ready = nil
	}
	if ready != nil {
		hostNet := ready.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
		if hostNet != pod.Spec.HostNetwork {
			ready = nil
		}
	}
	if ready == nil {
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && len(s.SandboxStatuses) > 0 && hasAppContainerStatus(pod, s) {
			a.KillPod = true
			return a
		}
		a.KillPod = len(s.SandboxStatuses) > 0 || len(s.ContainerStatuses) > 0
		a.CreateSandbox = true
		a.Attempt = s.NextAttempt()
		if len(pod.Spec.InitContainers) > 0 {
			a.InitToStart = []int{0}
		} else {
			for i := range pod.Spec.Containers {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
		}
		return a
	}
	a.SandboxID = ready.Id
	// Ephemeral containers start once in the running sandbox and are never restarted (nor started again
	// in a new sandbox): only one that never ran is started.
	for i := range pod.Spec.EphemeralContainers {
		if s.FindContainerStatus(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralToStart = append(a.EphemeralToStart, i)
		}
	}
	kill := func(st *ContainerStatus, c *v1.Container, msg string) {
		a.ContainersToKill[st.ID] = killInfo{name: c.Name, container: c, message: msg}
	}
	killUnknown := func(st *ContainerStatus, c *v1.Container) {
		kill(st, c, fmt.Sprintf("Container %s is in %q state, try killing it", c.Name, st.State.String()))
	}
	// checkRunning decides for a running instance: ok to keep, or killed (restart tells whether the
	// caller should start it again).
	checkRunning := func(c *v1.Container, st *ContainerStatus) (keep, restart bool) {
		if st.Hash != containerHash(c) {
			kill(st, c, fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
			return false, true
		}
		if probe, bad := unhealthy(st.ContainerID()); bad {
			restart := IsRestartableInit(c) || pod.Spec.RestartPolicy != v1.RestartPolicyNever
			msg := fmt.Sprintf("Container %s failed %s probe", c.Name, probe)
			if restart {
				msg += ", will be restarted"
			}
			a.ContainersToKill[st.ID] = killInfo{name: c.Name, container: c, message: msg, grace: probeGracePeriod(pod, c, probe)}
			return false, restart
		}
		return true, false
	}

	initialized := hasAppContainerStatus(pod, s)
	initDone := true
initLoop:
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := s.FindContainerStatus(c.Name)
		if IsRestartableInit(c) {
			if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				if keep, restart := checkRunning(c, st); keep || !restart {
					continue
				}
			} else if st != nil && st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				killUnknown(st, c)
			}
			a.InitToStart = append(a.InitToStart, i)
			if !initialized {
				initDone = false
				break initLoop
			}
			continue
		}
		if initialized {
			continue
		}
		switch {
		case st == nil:
			a.InitToStart = append(a.InitToStart, i)
			initDone = false
			break initLoop
		case st.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			initDone = false
			break initLoop
		case st.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			if st.ExitCode == 0 {
				continue
			}
			if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
				a.KillPod = true
				a.InitToStart = nil
				return a
			}
			a.InitToStart = append(a.InitToStart, i)
			initDone = false
			break initLoop
		default:
			killUnknown(st, c)
			a.InitToStart = append(a.InitToStart, i)
			initDone = false
			break initLoop
		}
	}
	if !initDone {
		return a
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := s.FindContainerStatus(c.Name)
		switch {
		case st == nil:
			a.ContainersToStart = append(a.ContainersToStart, i)
		case st.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			if keep, restart := checkRunning(c, st); !keep && restart {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
		case st.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			if ShouldRestart(pod, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
		default:
			killUnknown(st, c)
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
	}
	return a
}

// removeDeadSandboxes removes the pod's sandboxes that were not ready in s and hold no container (a
// failed RunPodSandbox leaves one behind, with its network namespace when the network could not be torn
// down either), so failed attempts do not pile up. A sandbox the runtime cannot stop or remove yet
// (e.g. its CNI plugin is still missing) stays for the next attempt or garbage collection.
func (m *Manager) removeDeadSandboxes(ctx context.Context, pod *v1.Pod, s *PodStatus) {
	used := map[string]bool{}
	for _, c := range s.ContainerStatuses {
		used[c.SandboxID] = true
	}
	for _, sb := range s.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || used[sb.Id] {
			continue
		}
		err := m.stopSandbox(ctx, sb.Id)
		if err == nil {
			err = m.removeSandbox(ctx, sb.Id)
		}
		if err != nil {
			m.log.Debug("dead sandbox not removed yet", "pod", pod.Namespace+"/"+pod.Name, "sandboxID", sb.Id, "err", err)
			continue
		}
		m.log.Info("dead sandbox removed", "pod", pod.Namespace+"/"+pod.Name, "sandboxID", sb.Id, "attempt", sb.GetMetadata().GetAttempt())
	}
}

// readySandboxes counts the pod's sandboxes in state SANDBOX_READY.
func readySandboxes(s *PodStatus) int {
	n := 0
	for _, sb := range s.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			n++
		}
	}
	return n
}

// SyncResult is the outcome of SyncPod. Err joins every failure (with the container's Waiting reason);
// RequeueAfter, when set, is when a back-off ends.
type SyncResult struct {
	RequeueAfter time.Duration
	Err          error
	// Changed: something was killed, created or started (the pod's runtime status must be re-read).
	Changed bool
}

// SyncPod converges the pod's sandbox and containers to its spec (see computePodActions for the rules),
// emitting events for what it does. unhealthy names container instances to restart after failed
// liveness or startup probes (nil: none).
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, s *PodStatus, unhealthy UnhealthyFunc) SyncResult {
	if unhealthy == nil {
		unhealthy = func(string) (FailedProbe, bool) { return "", false }
	}
	a := m.computePodActions(pod, s, unhealthy)
	if !a.KillPod && !a.CreateSandbox && len(a.ContainersToKill)+len(a.InitToStart)+len(a.ContainersToStart)+len(a.EphemeralToStart) == 0 {
		return SyncResult{}
	}
	podIPs := s.IPs
	if a.KillPod {
		if a.CreateSandbox && len(s.SandboxStatuses) > 0 {
			m.opts.Recorder.Event(pod, v1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		if err := m.KillPod(ctx, pod, s, nil); err != nil {
			return SyncResult{Err: err, Changed: true}
		}
		if !a.CreateSandbox {
			return SyncResult{Changed: true}
		}
	}
	if a.CreateSandbox {
		m.removeDeadSandboxes(ctx, pod, s)
	}
	for id, k := range a.ContainersToKill {
		if err := m.killContainer(ctx, pod, k.container, id, k.name, k.grace, k.message, podIPs); err != nil {
			return SyncResult{Err: err}
		}
	}
	var sbCfg *runtimeapi.PodSandboxConfig
	var err error
	sandboxID := a.SandboxID
	if a.CreateSandbox {
		if err := m.ensurePodCgroup(ctx, pod); err != nil {
			m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return SyncResult{Err: err}
		}
		sandboxID, sbCfg, err = m.createSandbox(ctx, pod, a.Attempt)
		if err != nil {
			m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return SyncResult{Err: err}
		}
		st, err := m.opts.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
		if err != nil {
			return SyncResult{Err: fmt.Errorf("PodSandboxStatus %s: %w", sandboxID, err)}
		}
		podIPs = sandboxIPs(st.Status)
		m.log.Info("sandbox created", "pod", pod.Namespace+"/"+pod.Name, "sandboxID", sandboxID, "attempt", a.Attempt, "podIPs", podIPs)
	} else if len(a.InitToStart)+len(a.ContainersToStart)+len(a.EphemeralToStart) > 0 {
		if sbCfg, err = m.sandboxConfig(pod, s.SandboxStatuses[0].GetMetadata().GetAttempt()); err != nil {
			return SyncResult{Err: err}
		}
	}
	res := SyncResult{Changed: true}
	start := func(c *v1.Container, target string) bool {
		d, w := m.startContainer(ctx, pod, c, s, sandboxID, sbCfg, podIPs, target)
		if d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
		if w != nil {
			res.Err = errors.Join(res.Err, fmt.Errorf("container %q: %s: %s", c.Name, w.Reason, w.Message))
			return false
		}
		return true
	}
	for _, i := range a.EphemeralToStart {
		ec := &pod.Spec.EphemeralContainers[i]
		target := ""
		if ec.TargetContainerName != "" {
			t := s.FindContainerStatus(ec.TargetContainerName)
			if t == nil {
				w := &Waiting{Reason: CreateContainerConfigError, Message: fmt.Sprintf("unable to find target container %s", ec.TargetContainerName)}
				m.setWaiting(pod.UID, ec.Name, w)
				res.Err = errors.Join(res.Err, fmt.Errorf("container %q: %s: %s", ec.Name, w.Reason, w.Message))
				continue
			}
			target = t.ID
		}
		start((*v1.Container)(&ec.EphemeralContainerCommon), target)
	}
	for _, i := range a.InitToStart {
		if !start(&pod.Spec.InitContainers[i], "") {
			return res
		}
	}
	for _, i := range a.ContainersToStart {
		start(&pod.Spec.Containers[i], "")
	}
	return res
}

func specByName(pod *v1.Pod) map[string]*v1.Container {
	out := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		out[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		out[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	for i := range pod.Spec.EphemeralContainers {
		out[pod.Spec.EphemeralContainers[i].Name] = (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	return out
}

// KillPod stops the pod's running containers — app containers first, in parallel, then init and sidecar
// containers — each with its preStop hook and the grace period (grace, else the pod's), then stops its
// sandboxes (which tears down the pod network). Containers stay for their status and logs.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, s *PodStatus, grace *int64) error {
	specs := specByName(pod)
	isInit := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		isInit[c.Name] = true
	}
	var errs []error
	var mu sync.Mutex
	for _, initPhase := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, st := range s.ContainerStatuses {
			if isInit[st.Name] != initPhase {
				continue
			}
			if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING && st.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				continue
			}
			wg.Add(1)
			go func(st *ContainerStatus) {
				defer wg.Done()
				if err := m.killContainer(ctx, pod, specs[st.Name], st.ID, st.Name, grace, "", s.IPs); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}(st)
		}
		wg.Wait()
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, sb := range s.SandboxStatuses {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if err := m.stopSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CleanupPod releases what a terminated pod holds on the node besides its containers: its cgroups.
func (m *Manager) CleanupPod(ctx context.Context, uid types.UID) error {
	return m.removePodCgroups(ctx, uid)
}

// RemovePod removes every container and sandbox of the pod from the runtime, then its log directory and
// cgroups. Already-removed objects are fine.
func (m *Manager) RemovePod(ctx context.Context, pod *v1.Pod) error {
	sel := map[string]string{kubelettypes.KubernetesPodUIDLabel: string(pod.UID)}
	var errs []error
	ctrs, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	for _, c := range ctrs.Containers {
		if _, err := m.opts.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("RemoveContainer %s: %w", c.Id, err))
		}
	}
	sbs, err := m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("ListPodSandbox: %w", err))...)
	}
	for _, sb := range sbs.Items {
		if err := m.stopSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.removeSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(PodLogsDir(m.opts.PodLogsDir, pod)); err != nil {
		errs = append(errs, err)
	}
	if err := m.removePodCgroups(ctx, pod.UID); err != nil {
		errs = append(errs, err)
	}
	m.ForgetPod(pod)
	return errors.Join(errs...)
}

// GarbageCollect removes, for the pods active reports true for, the dead instances of each container
// beyond the newest MaxPerPodContainer, and dead sandboxes other than the newest one that no container
// uses any more. Pods that are not active are left to the kubelet's pod removal.
func (m *Manager) GarbageCollect(ctx context.Context, active func(types.UID) bool) error {
	ctrs, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	byName := map[string][]*runtimeapi.Container{}
	usedSandbox := map[string]bool{}
	for _, c := range ctrs.Containers {
		uid := types.UID(kubelettypes.GetPodUID(c.Labels))
		if uid == "" || !active(uid) {
			usedSandbox[c.PodSandboxId] = true
			continue
		}
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			usedSandbox[c.PodSandboxId] = true
			continue
		}
		k := string(uid) + "/" + kubelettypes.GetContainerName(c.Labels)
		byName[k] = append(byName[k], c)
	}
	var errs []error
	for _, list := range byName {
		sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
		for i, c := range list {
			if i < m.opts.MaxPerPodContainer {
				usedSandbox[c.PodSandboxId] = true
				continue
			}
			if err := m.removeTerminationMessageFile(ctx, c.Id); err != nil {
				errs = append(errs, err)
			}
			if _, err := m.opts.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil && !isNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	sbs, err := m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	newest := map[string]*runtimeapi.PodSandbox{}
	for _, sb := range sbs.Items {
		uid := sb.GetMetadata().GetUid()
		if n, ok := newest[uid]; !ok || sb.CreatedAt > n.CreatedAt {
			newest[uid] = sb
		}
	}
	for _, sb := range sbs.Items {
		uid := types.UID(sb.GetMetadata().GetUid())
		if !active(uid) || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || usedSandbox[sb.Id] || newest[string(uid)] == sb {
			continue
		}
		if _, err := m.opts.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
