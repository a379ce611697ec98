// Package state computes the proxy's desired state — one ServicePort per (Service, port) with its resolved
// endpoints — from core/v1 Services and discovery.k8s.io/v1 EndpointSlices. Both proxy backends (iptables and
// IPVS) program the kernel from this one computation, so its rules are the rules of the Service API:
//
//   - A Service is proxied when its spec.clusterIP is a valid IPv4 address (headless "None" Services and
//     ExternalName Services get no rules).
//   - EndpointSlices belong to a Service by the kubernetes.io/service-name label; only addressType IPv4 is used.
//   - A service port matches the endpoint slice port of the same name (the EndpointSlice controller has already
//     resolved a named targetPort to a number per pod, so endpoints of one Service may listen on different
//     ports).
//   - Endpoint conditions follow the EndpointSlice API: a nil ready or serving means true, a nil terminating
//     means false.
//   - Endpoint selection (ClusterEndpoints/LocalEndpoints) follows kube-proxy's topology rules: ready endpoints
//     first; serving-terminating endpoints only when no ready endpoint exists.
package state

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName names one port of one Service: "namespace/name:port" (port is the Service port's name, empty
// for an unnamed single port).
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String returns "namespace/name:port/PROTOCOL", the form used in logs, metrics and rule comments.
func (n ServicePortName) String() string {
	return n.Namespace + "/" + n.Name + ":" + n.Port + "/" + string(n.Protocol)
}

// Endpoint is one backend of a ServicePort: an IPv4 address and the port number resolved for this endpoint.
type Endpoint struct {
	IP          netip.Addr
	Port        int32
	NodeName    string
	Ready       bool
	Serving     bool
	Terminating bool
	// Local reports whether the endpoint runs on the proxy's own node (its nodeName equals Options.NodeName).
	Local bool
}

// String returns "ip:port".
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
}

// ServicePort is the desired proxying state for one port of one Service.
type ServicePort struct {
	Name        ServicePortName
	ClusterIP   netip.Addr
	Port        int32
	Protocol    v1.Protocol
	NodePort    int32        // 0 when the Service has none
	ExternalIPs []netip.Addr // spec.externalIPs, valid IPv4 only
	// AffinityTimeout is the sessionAffinity ClientIP timeout in seconds; 0 means no session affinity.
	AffinityTimeout int32
	// ExternalLocal is externalTrafficPolicy: Local (applies to NodePort and external IPs).
	ExternalLocal bool
	// InternalLocal is internalTrafficPolicy: Local (applies to the ClusterIP).
	InternalLocal bool
	// Endpoints holds every endpoint of the port, sorted by IP then port, without duplicates.
	Endpoints []Endpoint
}

// ClusterEndpoints returns the endpoints used with traffic policy Cluster: of all endpoints in the cluster,
// the ready ones, or the serving-terminating ones when none is ready (kube-proxy's CategorizeEndpoints).
func (sp *ServicePort) ClusterEndpoints() []Endpoint {
	return selectEndpoints(sp.Endpoints, false)
}

// LocalEndpoints returns the endpoints used with traffic policy Local: the same selection among the endpoints
// on this node only.
func (sp *ServicePort) LocalEndpoints() []Endpoint {
	return selectEndpoints(sp.Endpoints, true)
}

// InternalEndpoints returns the endpoints ClusterIP traffic goes to (internalTrafficPolicy).
func (sp *ServicePort) InternalEndpoints() []Endpoint {
	if sp.InternalLocal {
		return sp.LocalEndpoints()
	}
	return sp.ClusterEndpoints()
}

// ExternalEndpoints returns the endpoints NodePort and external-IP traffic goes to (externalTrafficPolicy).
func (sp *ServicePort) ExternalEndpoints() []Endpoint {
	if sp.ExternalLocal {
		return sp.LocalEndpoints()
	}
	return sp.ClusterEndpoints()
}

// HasExternal reports whether the port is reachable from outside the cluster network (a NodePort or
// external IPs).
func (sp *ServicePort) HasExternal() bool { return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 }

// HasEndpoints reports whether any endpoint anywhere in the cluster could serve the port (ready, or serving
// and terminating). A port without any gets REJECT rules; a Local-policy port with endpoints elsewhere only
// gets DROP for external traffic, as upstream.
func (sp *ServicePort) HasEndpoints() bool {
	for _, e := range sp.Endpoints {
		if e.Ready || (e.Serving && e.Terminating) {
			return true
		}
	}
	return false
}

func selectEndpoints(all []Endpoint, localOnly bool) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range all {
		if localOnly && !e.Local {
			continue
		}
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// Problem is one Service (port) the proxy cannot program, with the reason; it never stops the others.
type Problem struct {
	Service types.NamespacedName
	Port    string // the Service port's name or number, empty when the whole Service is rejected
	Reason  string
}

// String returns "namespace/name[:port]: reason".
func (p Problem) String() string {
	if p.Port != "" {
		return fmt.Sprintf("%s:%s: %s", p.Service, p.Port, p.Reason)
	}
	return fmt.Sprintf("%s: %s", p.Service, p.Reason)
}

// Snapshot is the full desired state at one instant.
type Snapshot struct {
	// Ports holds every proxied service port, sorted by name.
	Ports []*ServicePort
	// Problems lists Services or ports that were skipped, sorted.
	Problems []Problem
	// Recomputed is the number of Services computed anew (all of them without a Cache; with one, those
	// whose Service or EndpointSlices changed since the previous Compute).
	Recomputed int
}

// Options parameterise Compute.
type Options struct {
	// NodeName is this node's name, compared with endpoint nodeName for traffic policy Local.
	NodeName string
}

// ServiceNameLabel is the EndpointSlice label naming its Service (discovery.k8s.io/v1).
const ServiceNameLabel = discovery.LabelServiceName

// Compute builds the Snapshot from Services and EndpointSlices. Invalid Services or ports (a port of 0 or
// above 65535, an unknown protocol, a malformed clusterIP, a nodePort out of range) are reported in
// Snapshot.Problems and skipped; a service port whose slices carry no port of its name is kept with no
// endpoints and reported too, so it REJECTs like any Service without endpoints.
func Compute(services []*v1.Service, slices []*discovery.EndpointSlice, opts Options) *Snapshot {
	return new(Cache).Compute(services, slices, opts)
}

// Cache makes repeated Computes incremental, as kube-proxy's change trackers do: a Service whose object and
// EndpointSlice objects are the same pointers as in the previous Compute (informer caches replace an object
// on every change and never modify one) keeps its ServicePorts and Problems, pointers included, so a
// backend can skip an unchanged port by comparing pointers. The zero value is ready; a Cache is not safe
// for concurrent use.
type Cache struct {
	opts    Options
	entries map[types.NamespacedName]*cacheEntry
}

type cacheEntry struct {
	svc      *v1.Service
	slices   []*discovery.EndpointSlice
	ports    []*ServicePort
	problems []Problem
}

// Compute is the package's Compute, reusing the result of every Service unchanged since the last call.
func (c *Cache) Compute(services []*v1.Service, slices []*discovery.EndpointSlice, opts Options) *Snapshot {
	if c.entries == nil || c.opts != opts {
		c.entries, c.opts = map[types.NamespacedName]*cacheEntry{}, opts
	}
	byService := make(map[types.NamespacedName][]*discovery.EndpointSlice, len(c.entries))
	for _, s := range slices {
		name := s.Labels[ServiceNameLabel]
		if name == "" || s.AddressType != discovery.AddressTypeIPv4 {
			continue
		}
		key := types.NamespacedName{Namespace: s.Namespace, Name: name}
		byService[key] = append(byService[key], s)
	}
	snap := &Snapshot{Ports: make([]*ServicePort, 0, len(services))}
	next := make(map[types.NamespacedName]*cacheEntry, len(services))
	for _, svc := range services {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		sl := byService[key]
		// Lister order is a map's: sort the Service's slices by name so that the same set compares equal.
		if len(sl) > 1 {
			sortSlices(sl)
		}
		e := c.entries[key]
		if e == nil || e.svc != svc || !equalPointers(e.slices, sl) {
			e = &cacheEntry{svc: svc, slices: sl}
			e.ports, e.problems = servicePorts(svc, sl, opts)
			snap.Recomputed++
		}
		next[key] = e
		snap.Ports = append(snap.Ports, e.ports...)
		snap.Problems = append(snap.Problems, e.problems...)
	}
	c.entries = next
	slicesSortFunc(snap)
	return snap
}

func sortSlices(sl []*discovery.EndpointSlice) {
	slices.SortFunc(sl, func(a, b *discovery.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
}

func equalPointers[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func slicesSortFunc(snap *Snapshot) {
	// By namespace, name, port name and protocol, field by field: formatting String() per comparison cost
	// 10k Services 1.3 s of CPU per sync.
	slices.SortFunc(snap.Ports, func(a, b *ServicePort) int {
		return cmp.Or(cmp.Compare(a.Name.Namespace, b.Name.Namespace), cmp.Compare(a.Name.Name, b.Name.Name),
			cmp.Compare(a.Name.Port, b.Name.Port), cmp.Compare(a.Name.Protocol, b.Name.Protocol))
	})
	slices.SortFunc(snap.Problems, func(a, b Problem) int { return cmp.Compare(a.String(), b.String()) })
}

func servicePorts(svc *v1.Service, svcSlices []*discovery.EndpointSlice, opts Options) ([]*ServicePort, []Problem) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		return nil, nil // headless or ExternalName: DNS-only, no proxying
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !clusterIP.Is4() {
		return nil, []Problem{{Service: key, Reason: fmt.Sprintf("spec.clusterIP %q is not an IPv4 address", svc.Spec.ClusterIP)}}
	}
	var problems []Problem
	var externalIPs []netip.Addr
	for _, s := range svc.Spec.ExternalIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil || !ip.Is4() {
			problems = append(problems, Problem{Service: key, Reason: fmt.Sprintf("spec.externalIPs: %q is not an IPv4 address; ignored", s)})
			continue
		}
		externalIPs = append(externalIPs, ip)
	}
	var affinity int32
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		affinity = v1.DefaultClientIPServiceAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = *c.ClientIP.TimeoutSeconds
		}
	}
	externalLocal := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal &&
		(svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(externalIPs) > 0)
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal

	var out []*ServicePort
	for i, p := range svc.Spec.Ports {
		portID := p.Name
		if portID == "" {
			portID = strconv.Itoa(int(p.Port))
		}
		if reason := validatePort(i, p); reason != "" {
			problems = append(problems, Problem{Service: key, Port: portID, Reason: reason})
			continue
		}
		sp := &ServicePort{
			Name:            ServicePortName{NamespacedName: key, Port: p.Name, Protocol: p.Protocol},
			ClusterIP:       clusterIP,
			Port:            p.Port,
			Protocol:        p.Protocol,
			ExternalIPs:     externalIPs,
			AffinityTimeout: affinity,
			ExternalLocal:   externalLocal,
			InternalLocal:   internalLocal,
		}
		if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			sp.NodePort = p.NodePort
		}
		var matched bool
		sp.Endpoints, matched = resolveEndpoints(p, svcSlices, opts.NodeName)
		// A slice without endpoints (the placeholder the EndpointSlice controller writes while no pod is
		// selected yet) has no ports either: that is "no endpoints", not an unresolvable targetPort.
		if !matched && slices.ContainsFunc(svcSlices, func(es *discovery.EndpointSlice) bool { return len(es.Endpoints) > 0 }) {
			problems = append(problems, Problem{Service: key, Port: portID,
				Reason: fmt.Sprintf("no EndpointSlice has a port named %q for protocol %s (targetPort %s unresolved); rejecting", p.Name, p.Protocol, p.TargetPort.String())})
		}
		out = append(out, sp)
	}
	return out, problems
}

// validatePort returns why spec.ports[i] cannot be proxied, or "".
func validatePort(i int, p v1.ServicePort) string {
	switch {
	case p.Port < 1 || p.Port > 65535:
		return fmt.Sprintf("spec.ports[%d].port %d is outside 1-65535", i, p.Port)
	case p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != v1.ProtocolSCTP:
		return fmt.Sprintf("spec.ports[%d].protocol %q is not TCP, UDP or SCTP", i, p.Protocol)
	case p.NodePort < 0 || p.NodePort > 65535:
		return fmt.Sprintf("spec.ports[%d].nodePort %d is outside 0-65535", i, p.NodePort)
	}
	return ""
}

// resolveEndpoints collects the endpoints of service port p from the Service's slices: each slice contributes
// its port whose name (and protocol) equals p's, for every IPv4 address of its endpoints. matched reports
// whether any slice had such a port.
func resolveEndpoints(p v1.ServicePort, svcSlices []*discovery.EndpointSlice, nodeName string) (eps []Endpoint, matched bool) {
	seen := map[netip.AddrPort]int{}
	for _, s := range svcSlices {
		port, ok := slicePort(s, p)
		if !ok {
			continue
		}
		matched = true
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			serving := ready
			if ep.Conditions.Serving != nil {
				serving = *ep.Conditions.Serving
			}
			terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
			node := ""
			if ep.NodeName != nil {
				node = *ep.NodeName
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || !ip.Is4() {
					continue
				}
				e := Endpoint{IP: ip, Port: port, NodeName: node, Ready: ready, Serving: serving, Terminating: terminating,
					Local: nodeName != "" && node == nodeName}
				ap := netip.AddrPortFrom(ip, uint16(port))
				if i, dup := seen[ap]; dup {
					// The same endpoint in two slices (a slice move in flight): keep the most usable view.
					if e.Ready && !eps[i].Ready {
						eps[i] = e
					}
					continue
				}
				seen[ap] = len(eps)
				eps = append(eps, e)
			}
		}
	}
	slices.SortFunc(eps, func(a, b Endpoint) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return eps, matched
}

func slicePort(s *discovery.EndpointSlice, p v1.ServicePort) (int32, bool) {
	for _, sp := range s.Ports {
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		proto := v1.ProtocolTCP
		if sp.Protocol != nil {
			proto = *sp.Protocol
		}
		if name == p.Name && proto == p.Protocol && sp.Port != nil && *sp.Port > 0 && *sp.Port <= 65535 {
			return *sp.Port, true
		}
	}
	return 0, false
}

// ProtocolNumber returns the IP protocol number of a Service protocol (TCP 6, UDP 17, SCTP 132), as the
// kernel's rules and IPVS services name it; anything else is TCP, which Compute has already rejected.
func ProtocolNumber(p v1.Protocol) uint8 {
	switch p {
	case v1.ProtocolUDP:
		return 17
	case v1.ProtocolSCTP:
		return 132
	}
	return 6
}
