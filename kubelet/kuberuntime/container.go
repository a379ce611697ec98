package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/probes"
)

// Container start failure reasons, as upstream's container status shows them.
const (
	CrashLoopBackOff           = "CrashLoopBackOff"
	CreateContainerConfigError = "CreateContainerConfigError"
	CreateContainerError       = "CreateContainerError"
	RunContainerError          = "RunContainerError"
	PostStartHookError         = "PostStartHookError"
)

// minGracePeriod is the shortest stop timeout given to a container (upstream's
// minimumGracePeriodInSeconds).
const minGracePeriod = 2

// containerConfig builds the CRI ContainerConfig for c: image, command/args with $(VAR) expansion,
// working dir, env and mounts from the RuntimeHelper plus the termination message file, log path <name>/<restartCount>.log below the pod log
// directory, labels/annotations, resources and security context. A non-empty target is the CRI ID of the
// container whose process namespace an ephemeral container with targetContainerName joins (PID mode
// TARGET, as upstream), unless the pod shares one process namespace anyway (shareProcessNamespace, hostPID).
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, podIPs []string, imageRef, target string) (*runtimeapi.ContainerConfig, error) {
	sc, err := containerSecurityContext(pod, c)
	if err != nil {
		return nil, err
	}
	if ns := sc.NamespaceOptions; target != "" && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, target
	}
	opts, err := m.opts.Helper.GenerateRunContainerOptions(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	env := make(map[string]string, len(opts.Envs))
	for _, e := range opts.Envs {
		env[e.Key] = string(e.Value)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	expand := func(in []string) []string {
		var out []string
		for _, s := range in {
			out = append(out, ExpandVars(s, lookup))
		}
		return out
	}
	mounts := opts.Mounts
	if m.opts.PodContainerDir != nil {
		tm, err := terminationMessageMount(m.opts.PodContainerDir(pod.UID, c.Name), c)
		if err != nil {
			return nil, err
		}
		if tm != nil {
			mounts = append(mounts, tm)
		}
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expand(c.Command),
		Args:        expand(c.Args),
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount),
		Mounts:      mounts,
		Envs:        opts.Envs,
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(pod, c, m.memCapacity),
			SecurityContext: sc,
		},
	}
	return cfg, nil
}

// ExpandVars replaces $(NAME) in s with lookup(NAME) as Kubernetes expands command, args and env values:
// $$ is an escaped $, and a reference that lookup does not know is left as written.
func ExpandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// backOffKey identifies a container's restart back-off: pod UID, container name and spec hash, so a
// changed spec starts without the old back-off.
func backOffKey(pod *v1.Pod, c *v1.Container) string {
	return string(pod.UID) + "_" + c.Name + "_" + containerHash(c)
}

// inBackOff reports whether c must wait before its next restart (CrashLoopBackOff) and for how long;
// otherwise it records this restart in the back-off (10s doubling to the max, reset when the previous
// restart is older than twice the max, i.e. after 10 min of running).
func (m *Manager) inBackOff(pod *v1.Pod, c *v1.Container, last *ContainerStatus) (time.Duration, bool) {
	if last == nil || last.State != runtimeapi.ContainerState_CONTAINER_EXITED || last.FinishedAt.IsZero() {
		return 0, false
	}
	key := backOffKey(pod, c)
	if m.backOff.IsInBackOffSince(key, last.FinishedAt) {
		return m.backOff.Get(key) - time.Since(last.FinishedAt), true
	}
	m.backOff.Next(key, last.FinishedAt)
	return 0, false
}

// startContainer pulls the image, creates and starts c in the sandbox and runs its postStart hook. On
// failure it returns the Waiting reason for the container's status (and records it); requeue is set
// to the rest of a CrashLoopBackOff. target is the process-namespace target of an ephemeral container
// (see containerConfig), "" for others.
func (m *Manager) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, status *PodStatus, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, podIPs []string, target string) (requeue time.Duration, w *Waiting) {
	defer func() { m.setWaiting(pod.UID, c.Name, w) }()
	last := status.FindContainerStatus(c.Name)
	if d, backoff := m.inBackOff(pod, c, last); backoff {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", m.backOff.Get(backOffKey(pod, c)), c.Name, pod.Name, pod.Namespace, pod.UID)
		m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
		return d, &Waiting{Reason: CrashLoopBackOff, Message: msg}
	}
	imageRef, w := m.puller.ensure(ctx, pod, c, m.opts.Helper.GetPullSecrets(ctx, pod), sandboxCfg)
	if w != nil {
		// No requeue of its own for a failed pull or one in back-off: the pod worker's error retry
		// (shorter than the 10s initial pull back-off) applies, as upstream's pod worker retries a failed
		// sync after its backOffPeriod. A retry timed at the back-off's end would always find it expired,
		// pull again, and the status would never show ImagePullBackOff between pulls.
		return 0, w
	}
	restartCount := 0
	if last != nil {
		restartCount = last.RestartCount + 1
	}
	cfg, err := m.containerConfig(ctx, pod, c, restartCount, podIPs, imageRef, target)
	if err != nil {
		m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return 0, &Waiting{Reason: CreateContainerConfigError, Message: err.Error()}
	}
	if err := os.MkdirAll(filepath.Join(sandboxCfg.LogDirectory, c.Name), 0o755); err != nil {
		return 0, &Waiting{Reason: CreateContainerError, Message: err.Error()}
	}
	created, err := m.opts.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandboxCfg})
	if err != nil {
		m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return 0, &Waiting{Reason: CreateContainerError, Message: err.Error()}
	}
	m.opts.Recorder.Eventf(pod, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if _, err := m.opts.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return 0, &Waiting{Reason: RunContainerError, Message: err.Error()}
	}
	m.opts.Recorder.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	m.log.Info("container started", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", created.ContainerId, "restartCount", restartCount)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg, err := m.runHandler(ctx, pod, c, created.ContainerId, c.Lifecycle.PostStart, podIPs, 2*time.Minute); err != nil {
			m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v %s", err, msg)
			_ = m.killContainer(ctx, pod, c, created.ContainerId, c.Name, nil, "FailedPostStartHook", podIPs)
			return 0, &Waiting{Reason: PostStartHookError, Message: fmt.Sprintf("%v %s", err, msg)}
		}
	}
	return 0, nil
}

// runHandler runs a lifecycle hook (exec through CRI ExecSync, httpGet through probes.HTTPHook, or sleep)
// within timeout and returns its output for messages.
func (m *Manager) runHandler(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler, podIPs []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		resp, err := m.opts.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: h.Exec.Command, Timeout: int64(timeout.Seconds())})
		if err != nil {
			return "", err
		}
		out := string(resp.Stdout) + string(resp.Stderr)
		if resp.ExitCode != 0 {
			return out, fmt.Errorf("command %q exited with %d", h.Exec.Command, resp.ExitCode)
		}
		return out, nil
	case h.HTTPGet != nil:
		podIP := ""
		if len(podIPs) > 0 {
			podIP = podIPs[0]
		}
		return "", probes.HTTPHook(ctx, h.HTTPGet, c, podIP)
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return "", nil
	}
	return "", fmt.Errorf("lifecycle handler of container %q has no exec, httpGet or sleep action", c.Name)
}

// killContainer runs c's preStop hook (when c is known and has one), then stops the container with
// the remaining grace period (at least 2 s): CRI StopContainer sends the stop signal and kills it when
// the timeout expires. grace nil means the pod's deletion or spec grace period. The Killing event says
// message, or "Stopping container <name>" when message is empty (upstream's wording).
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, id, name string, grace *int64, message string, podIPs []string) error {
	g := int64(v1.DefaultTerminationGracePeriodSeconds)
	switch {
	case grace != nil:
		g = *grace
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	msg := message
	if msg == "" {
		msg = fmt.Sprintf("Stopping container %s", name)
	}
	m.opts.Recorder.Event(pod, v1.EventTypeNormal, "Killing", msg)
	m.log.Info("killing container", "pod", pod.Namespace+"/"+pod.Name, "container", name, "containerID", id, "gracePeriod", g, "reason", message)
	if c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && g > 0 {
		start := time.Now()
		if out, err := m.runHandler(ctx, pod, c, id, c.Lifecycle.PreStop, podIPs, time.Duration(g)*time.Second); err != nil {
			m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v %s", err, out)
		}
		g -= int64(time.Since(start).Seconds())
	}
	if g < minGracePeriod {
		g = minGracePeriod
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(g)*time.Second+30*time.Second)
	defer cancel()
	if _, err := m.opts.Runtime.StopContainer(sctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: g}); err != nil && !isNotFound(err) {
		return fmt.Errorf("StopContainer %s (%s): %w", name, id, err)
	}
	return nil
}
