// Package endpointslicemirroring is upstream's EndpointSlice mirroring controller: the core/v1
// Endpoints of a Service without a selector (written by hand or by an external controller) are mirrored
// into EndpointSlices labelled kubernetes.io/service-name=<name> and
// endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io, owned by the
// Endpoints, updated with it and deleted with it. Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror=true, Endpoints carrying a leader-election record, Endpoints
// without a Service and those of Services with a selector (the EndpointSlice controller's) are not
// mirrored, and their mirrored slices are removed.
package endpointslicemirroring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/nodekit/nodekit/controlplane/controllers/endpointslice"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

const (
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the slices this controller
	// writes (kube-controller-manager's value).
	ManagedBy = "endpointslicemirroring-controller.k8s.io"
	// MaxEndpointsPerSubset is how many addresses of one Endpoints subset are mirrored (upstream's
	// --mirroring-max-endpoints-per-subset default, also the most one EndpointSlice may hold); the
	// rest are skipped with a log line.
	MaxEndpointsPerSubset = 1000
)

// Controller mirrors Endpoints into EndpointSlices. Queue keys are Endpoints (= Service) keys.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	*workloop.Loop
}

// New registers the controller's handlers on factory's Endpoints, Service and EndpointSlice informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:    client,
		services:  factory.Core().V1().Services().Lister(),
		endpoints: factory.Core().V1().Endpoints().Lister(),
		slices:    factory.Discovery().V1().EndpointSlices().Lister(),
	}
	c.Loop = workloop.New("endpointslicemirroring", c.reconcile, log)
	for _, inf := range []cache.SharedIndexInformer{factory.Core().V1().Endpoints().Informer(), factory.Core().V1().Services().Informer()} {
		if _, err := inf.AddEventHandler(c.Handler()); err != nil {
			return nil, err
		}
	}
	// A mirrored slice changed or deleted behind our back is put right again.
	if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(endpointslice.SliceHandler(ManagedBy, c.Add)); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return err
	}
	slices.SortFunc(existing, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return endpointslice.DeleteSlices(ctx, c.client, existing, nil)
	}
	if err != nil {
		return err
	}
	if !shouldMirror(ep) {
		return endpointslice.DeleteSlices(ctx, c.client, existing, nil)
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return endpointslice.DeleteSlices(ctx, c.client, existing, nil)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector != nil {
		return endpointslice.DeleteSlices(ctx, c.client, existing, nil)
	}
	want, skipped := desiredSlices(ep)
	if skipped > 0 {
		c.Log().Warn("endpoints addresses not mirrored (not an IP, or past the per-subset maximum)",
			"endpoints", key, "skipped", skipped, "maxPerSubset", MaxEndpointsPerSubset)
	}
	keep, err := endpointslice.ApplySlices(ctx, c.client, existing, want)
	return errors.Join(err, endpointslice.DeleteSlices(ctx, c.client, existing, keep))
}

// shouldMirror is upstream's rule: not labelled skip-mirror=true and not a leader-election lock.
func shouldMirror(ep *v1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, lock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !lock
}

// group is the mirrored endpoints of one address type and one port list.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
	seen        map[string]bool
}

// desiredSlices maps the Endpoints' subsets to slices: addresses (ready) and notReadyAddresses
// (ready=false) grouped by address family and port list, each IP once per group (a ready entry wins),
// at most MaxEndpointsPerSubset per subset. It returns the number of addresses skipped.
func desiredSlices(ep *v1.Endpoints) ([]*discoveryv1.EndpointSlice, int) {
	byKey := map[string]*group{}
	skipped := 0
	for _, ss := range ep.Subsets {
		ports := mirrorPorts(ss.Ports)
		added := 0
		add := func(a v1.EndpointAddress, ready bool) {
			addr, err := netip.ParseAddr(a.IP)
			if err != nil || added >= MaxEndpointsPerSubset {
				skipped++
				return
			}
			added++
			addr = addr.Unmap()
			at := discoveryv1.AddressTypeIPv4
			if addr.Is6() {
				at = discoveryv1.AddressTypeIPv6
			}
			k := portsKey(at, ports)
			g := byKey[k]
			if g == nil {
				g = &group{addressType: at, ports: ports, seen: map[string]bool{}}
				byKey[k] = g
			}
			ip := addr.String()
			if g.seen[ip] {
				return
			}
			g.seen[ip] = true
			e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: a.TargetRef, NodeName: a.NodeName}
			if a.Hostname != "" {
				e.Hostname = &a.Hostname
			}
			g.endpoints = append(g.endpoints, e)
		}
		for _, a := range ss.Addresses {
			add(a, true)
		}
		for _, a := range ss.NotReadyAddresses {
			add(a, false)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []*discoveryv1.EndpointSlice
	for _, k := range keys {
		g := byKey[k]
		slices.SortFunc(g.endpoints, func(a, b discoveryv1.Endpoint) int { return cmp.Compare(a.Addresses[0], b.Addresses[0]) })
		for start := 0; start < len(g.endpoints); start += MaxEndpointsPerSubset {
			s := newSlice(ep, g)
			s.Endpoints = g.endpoints[start:min(start+MaxEndpointsPerSubset, len(g.endpoints))]
			out = append(out, s)
		}
	}
	return out, skipped
}

// newSlice is upstream's mirrored slice: the Endpoints' labels (service-name and managed-by set) and
// annotations (less last-change-trigger-time and last-applied-configuration), owned by the Endpoints.
func newSlice(ep *v1.Endpoints, g *group) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ep.Name + "-",
			Namespace:       ep.Namespace,
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, v1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: g.addressType,
		Ports:       g.ports,
	}
	for k, v := range ep.Labels {
		s.Labels[k] = v
	}
	s.Labels[discoveryv1.LabelServiceName] = ep.Name
	s.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	for k, v := range ep.Annotations {
		if k != v1.EndpointsLastChangeTriggerTime && k != v1.LastAppliedConfigAnnotation {
			s.Annotations[k] = v
		}
	}
	return s
}

// mirrorPorts converts the subset's ports, in a canonical order (by name, then port and protocol).
func mirrorPorts(in []v1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(in))
	for _, p := range in {
		p := p
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &proto, AppProtocol: p.AppProtocol})
	}
	slices.SortFunc(out, func(a, b discoveryv1.EndpointPort) int {
		return cmp.Or(cmp.Compare(*a.Name, *b.Name), cmp.Compare(*a.Port, *b.Port), cmp.Compare(*a.Protocol, *b.Protocol))
	})
	return out
}

func portsKey(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	b.WriteString(string(at))
	for _, p := range ports {
		fmt.Fprintf(&b, "|%s/%s/%d", *p.Name, *p.Protocol, *p.Port)
	}
	return b.String()
}
