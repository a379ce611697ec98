// Package sysctl is the kubelet's admission of pod sysctls (upstream's pkg/kubelet/sysctl): a pod may
// set only the safe sysctls and those the node's allowedUnsafeSysctls permit; any other makes the
// kubelet reject the pod (phase Failed, reason SysctlForbidden) before anything of it runs.
package sysctl

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/node/util/sysctl"
)

// ForbiddenReason is the pod status reason of a pod rejected for its sysctls (upstream's).
const ForbiddenReason = "SysctlForbidden"

// Safe are the sysctls every pod may set: namespaced, and isolated from the node and other pods
// (upstream's safe set for kernels nodekit supports, Linux >= 4.15).
var Safe = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Allowlist admits pod sysctls: exact names (the safe ones and allowed unsafe ones) and prefixes
// (allowed unsafe patterns ending in "*"), each with its kernel namespace.
type Allowlist struct {
	names    map[string]sysctl.Namespace
	prefixes map[string]sysctl.Namespace
}

// New returns the allowlist of the safe sysctls plus allowedUnsafe (upstream's allowedUnsafeSysctls:
// names, or prefixes ending in "*", e.g. "net.core.*"). An entry that is not a namespaced sysctl (or a
// prefix inside one namespace) is an error naming it, as the kubelet refuses to start with one.
func New(allowedUnsafe []string) (*Allowlist, error) {
	w := &Allowlist{names: map[string]sysctl.Namespace{}, prefixes: map[string]sysctl.Namespace{}}
	for _, s := range append(append([]string{}, Safe...), allowedUnsafe...) {
		s = sysctl.NormalizeName(s)
		if strings.HasSuffix(s, "*") {
			prefix := strings.TrimSuffix(s, "*")
			ns, _, _ := sysctl.GetNamespace(prefix)
			if ns == sysctl.UnknownNamespace {
				return nil, fmt.Errorf("allowedUnsafeSysctls: the sysctls %q are not known to be namespaced", s)
			}
			w.prefixes[prefix] = ns
			continue
		}
		ns, _, _ := sysctl.GetNamespace(s)
		if ns == sysctl.UnknownNamespace {
			return nil, fmt.Errorf("allowedUnsafeSysctls: the sysctl %q is not known to be namespaced", s)
		}
		w.names[s] = ns
	}
	return w, nil
}

// validate checks one sysctl against the list and the pod's host namespaces.
func (w *Allowlist) validate(name string, hostNet, hostIPC bool) error {
	name = sysctl.NormalizeName(name)
	ns, ok := w.names[name]
	if !ok {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == sysctl.IPCNamespace && hostIPC) || (ns == sysctl.NetNamespace && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// Admit returns "" when every sysctl of pod is allowed, else the rejection message (upstream's
// "forbidden sysctl: ..."), for status reason ForbiddenReason.
func (w *Allowlist) Admit(pod *v1.Pod) string {
	if pod.Spec.SecurityContext == nil {
		return ""
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return fmt.Sprintf("forbidden sysctl: %v", err)
		}
	}
	return ""
}
