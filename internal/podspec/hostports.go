package podspec

import v1 "k8s.io/api/core/v1"

// HostPort is one host port a pod claims: protocol (TCP when unset), host IP ("" for every address:
// unset, 0.0.0.0 or ::) and port.
type HostPort struct {
	Protocol v1.Protocol
	IP       string
	Port     int32
}

// HostPorts returns the host ports the pod's containers claim (ports with hostPort > 0), in order.
func HostPorts(pod *v1.Pod) []HostPort {
	var out []HostPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			ip := p.HostIP
			if ip == "0.0.0.0" || ip == "::" {
				ip = ""
			}
			out = append(out, HostPort{Protocol: proto, IP: ip, Port: p.HostPort})
		}
	}
	return out
}

// Conflicts reports whether two host ports cannot both be bound on one node: same protocol and port,
// and the same host IP or either of them on every address (the scheduler's NodePorts filter and the
// kubelet's admission both ask this).
func (a HostPort) Conflicts(b HostPort) bool {
	return a.Port == b.Port && a.Protocol == b.Protocol && (a.IP == b.IP || a.IP == "" || b.IP == "")
}

// HostPortsConflict reports whether any host port of want conflicts with one of have.
func HostPortsConflict(want, have []HostPort) bool {
	for _, w := range want {
		for _, h := range have {
			if w.Conflicts(h) {
				return true
			}
		}
	}
	return false
}
