package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Paths masked and made read-only in unprivileged containers (upstream's defaults, procMount Default).
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// namespaceOptions maps hostNetwork/hostPID/hostIPC and shareProcessNamespace to CRI namespace modes.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		o.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	return o
}

func podSC(pod *v1.Pod) *v1.PodSecurityContext {
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext
	}
	return &v1.PodSecurityContext{}
}

// supplementalGroups are the pod's supplementalGroups plus its fsGroup.
func supplementalGroups(psc *v1.PodSecurityContext) []int64 {
	g := append([]int64{}, psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		g = append(g, *psc.FSGroup)
	}
	return g
}

// sandboxSecurityContext is the sandbox's CRI security context: namespaces, the pod's user and groups,
// and privileged when any container is (a privileged container needs a privileged sandbox).
func sandboxSecurityContext(pod *v1.Pod) *runtimeapi.LinuxSandboxSecurityContext {
	psc := podSC(pod)
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions:   namespaceOptions(pod),
		SupplementalGroups: supplementalGroups(psc),
	}
	if psc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			sc.Privileged = true
		}
	}
	return sc
}

// containerSecurityContext merges the pod's and the container's security contexts (the container's
// fields win) into CRI's. It fails, naming the field, when runAsNonRoot is set with runAsUser 0.
func containerSecurityContext(pod *v1.Pod, c *v1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	psc := podSC(pod)
	csc := c.SecurityContext
	if csc == nil {
		csc = &v1.SecurityContext{}
	}
	out := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions:   namespaceOptions(pod),
		SupplementalGroups: supplementalGroups(psc),
	}
	user, group, nonRoot := psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
	if csc.RunAsUser != nil {
		user = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		group = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		nonRoot = csc.RunAsNonRoot
	}
	if user != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *user}
	}
	if group != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *group}
	}
	if nonRoot != nil && *nonRoot && user != nil && *user == 0 {
		return nil, fmt.Errorf("container %q: securityContext.runAsNonRoot is true but runAsUser is 0 (root)", c.Name)
	}
	if csc.Privileged != nil {
		out.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		out.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		out.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		out.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			out.Capabilities.AddCapabilities = append(out.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			out.Capabilities.DropCapabilities = append(out.Capabilities.DropCapabilities, string(d))
		}
	}
	if !out.Privileged && (csc.ProcMount == nil || *csc.ProcMount == v1.DefaultProcMount) {
		out.MaskedPaths = defaultMaskedPaths
		out.ReadonlyPaths = defaultReadonlyPaths
	}
	return out, nil
}
