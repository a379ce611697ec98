package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodLogsDir returns the pod's log directory, <root>/<namespace>_<name>_<uid> (upstream's layout, which
// log collectors expect).
func PodLogsDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// podHostname is the sandbox hostname: spec.hostname or the pod name, truncated to 63 characters (a
// DNS label); none for hostNetwork pods, which share the node's UTS namespace and so its hostname (as
// upstream's kubelet, which leaves PodSandboxConfig.hostname empty for them: a runtime refuses to set
// a hostname without a private UTS namespace).
func podHostname(pod *v1.Pod) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// sandboxConfig builds the CRI PodSandboxConfig: metadata with attempt, hostname, log directory, DNS,
// hostPort mappings, labels/annotations, cgroup parent and namespace/security options.
func (m *Manager) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	hostname := podHostname(pod)
	dns, err := m.opts.Helper.GetPodDNS(pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     hostname,
		LogDirectory: PodLogsDir(m.opts.PodLogsDir, pod),
		DnsConfig:    dns,
		Labels:       sandboxLabels(pod),
		Annotations:  sandboxAnnotations(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    m.CgroupParent(pod),
			SecurityContext: sandboxSecurityContext(pod),
			Sysctls:         sysctls(pod),
		},
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	return cfg, nil
}

func sysctls(pod *v1.Pod) map[string]string {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, s := range sc.Sysctls {
		out[s.Name] = s.Value
	}
	return out
}

// createSandbox makes the log directory and runs the sandbox under the pod's runtime handler (see
// Options.RuntimeHandler); it returns the sandbox ID and config.
func (m *Manager) createSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg, err := m.sandboxConfig(pod, attempt)
	if err != nil {
		return "", nil, err
	}
	handler := ""
	if m.opts.RuntimeHandler != nil {
		if handler, err = m.opts.RuntimeHandler(pod); err != nil {
			return "", nil, err
		}
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", nil, fmt.Errorf("pod log directory: %w", err)
	}
	m.creating.RLock()
	resp, err := m.opts.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	m.creating.RUnlock()
	if err != nil {
		return "", nil, fmt.Errorf("RunPodSandbox: %w", err)
	}
	return resp.PodSandboxId, cfg, nil
}

// SandboxTeardownTimeout bounds one StopPodSandbox or RemovePodSandbox call of the kubelet, which runs
// to completion even when its caller's context is cancelled (the agent shutting down mid-kill).
const SandboxTeardownTimeout = 30 * time.Second

// teardownContext is ctx's values without its cancellation, bounded by SandboxTeardownTimeout, as
// upstream kubelet does for its runtime calls: a StopPodSandbox cancelled after the runtime has killed
// the sandbox but before it has reaped it leaves containerd (1.6) with a sandbox whose shim no later
// StopPodSandbox/RemovePodSandbox shuts down once containerd restarts.
func teardownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), SandboxTeardownTimeout)
}

// stopSandbox calls CRI StopPodSandbox for id under teardownContext; NotFound is success.
func (m *Manager) stopSandbox(ctx context.Context, id string) error {
	ctx, cancel := teardownContext(ctx)
	defer cancel()
	if _, err := m.opts.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil && !isNotFound(err) {
		return fmt.Errorf("StopPodSandbox %s: %w", id, err)
	}
	return nil
}

// removeSandbox calls CRI RemovePodSandbox for id under teardownContext; NotFound is success.
func (m *Manager) removeSandbox(ctx context.Context, id string) error {
	ctx, cancel := teardownContext(ctx)
	defer cancel()
	if _, err := m.opts.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil && !isNotFound(err) {
		return fmt.Errorf("RemovePodSandbox %s: %w", id, err)
	}
	return nil
}
