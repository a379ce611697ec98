// Package endpointslice is the EndpointSlice controller together with the legacy Endpoints controller:
// for every Service with a selector it publishes the pods the selector matches, with their IPs, node
// names, per-pod resolved target ports (a named targetPort is looked up in each pod's container ports)
// and the ready / serving / terminating conditions of discovery.k8s.io/v1, in EndpointSlices labelled
// kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by; and the same set in the
// Service's core/v1 Endpoints object (ready addresses and notReadyAddresses). Services without a
// selector are left to whoever manages their endpoints.
package endpointslice

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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/podspec"
)

const (
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of slices this controller owns
	// (the value kube-controller-manager uses, so kube-proxy-like consumers treat them alike).
	ManagedBy = "endpointslice-controller.k8s.io"
	// MaxEndpointsPerSlice is how many endpoints one slice holds before another is started.
	MaxEndpointsPerSlice = 100
)

// Controller reconciles the EndpointSlices and Endpoints of Services. Queue keys are Service keys.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	slices    discoverylisters.EndpointSliceLister
	endpoints corelisters.EndpointsLister
	*workloop.Loop
}

// New registers the controller's handlers on factory's Service, Pod, EndpointSlice and Endpoints
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:    client,
		services:  factory.Core().V1().Services().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
		slices:    factory.Discovery().V1().EndpointSlices().Lister(),
		endpoints: factory.Core().V1().Endpoints().Lister(),
	}
	c.Loop = workloop.New("endpointslice", c.reconcile, log)
	if _, err := factory.Core().V1().Services().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.onPod(obj, nil) },
		UpdateFunc: func(oldObj, newObj any) {
			if o, n := oldObj.(*v1.Pod), newObj.(*v1.Pod); o.ResourceVersion != n.ResourceVersion {
				c.onPod(n, o)
			}
		},
		DeleteFunc: func(obj any) { c.onPod(obj, nil) },
	}); err != nil {
		return nil, err
	}
	// Slices changed behind our back (or deleted) are put right again.
	if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(SliceHandler(ManagedBy, c.Add)); err != nil {
		return nil, err
	}
	// So are the Endpoints of an existing Service. Endpoints without a Service are someone else's
	// (the conformance "lifecycle of an Endpoint" spec writes one): only the Service's deletion
	// removes its Endpoints, as upstream's endpoints controller does.
	byEndpoints := func(obj any) {
		if o, ok := obj.(*v1.Endpoints); ok {
			if _, err := c.services.Services(o.Namespace).Get(o.Name); err == nil {
				c.Add(workloop.KeyOf(o.Namespace, o.Name))
			}
		}
	}
	if _, err := factory.Core().V1().Endpoints().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: byEndpoints, UpdateFunc: func(_, o any) { byEndpoints(o) }, DeleteFunc: c.Enqueue,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// SliceHandler is an EndpointSlice event handler that calls add with the "namespace/service" key of
// every added, updated or deleted slice labelled managed-by managedBy and naming its Service.
func SliceHandler(managedBy string, add func(key string)) cache.ResourceEventHandler {
	bySlice := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(*discoveryv1.EndpointSlice); ok && o.Labels[discoveryv1.LabelManagedBy] == managedBy && o.Labels[discoveryv1.LabelServiceName] != "" {
			add(workloop.KeyOf(o.Namespace, o.Labels[discoveryv1.LabelServiceName]))
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: bySlice, UpdateFunc: func(_, o any) { bySlice(o) }, DeleteFunc: bySlice}
}

// onPod queues every Service in the pod's namespace whose selector matches the pod now or matched it
// before the update.
func (c *Controller) onPod(obj any, old *v1.Pod) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(pod.Labels)) || (old != nil && sel.Matches(labels.Set(old.Labels))) {
			c.Add(workloop.KeyOf(svc.Namespace, svc.Name))
		}
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Owner references let the garbage collector remove our slices; do it now as well. The
		// Endpoints have no owner: the Service's deletion removes them, as upstream's endpoints
		// controller does.
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return errors.Join(c.deleteSlices(ctx, ns, name, nil), err)
	}
	if err != nil {
		return err
	}
	if len(svc.Spec.Selector) == 0 || svc.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	groups := groupEndpoints(svc, pods)
	return errors.Join(c.syncSlices(ctx, svc, groups), c.syncEndpoints(ctx, svc, groups))
}

// endpoint is one pod's address with its conditions.
type endpoint struct {
	pod                         *v1.Pod
	ip                          string
	ready, serving, terminating bool
}

// group is the endpoints that share one address family and one resolved port list.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []endpoint
}

func (g *group) key() string {
	var b strings.Builder
	b.WriteString(string(g.addressType))
	for _, p := range g.ports {
		fmt.Fprintf(&b, "|%s/%s/%d", deref(p.Name), deref((*string)(p.Protocol)), deref(p.Port))
	}
	return b.String()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// groupEndpoints turns the selected pods into endpoint groups. Pods without an IP or finished are left
// out; terminating pods are kept with terminating=true (ready=false), as upstream does.
func groupEndpoints(svc *v1.Service, pods []*v1.Pod) []*group {
	byKey := map[string]*group{}
	var order []string
	for _, pod := range pods {
		if podspec.IsTerminal(pod.Status.Phase) || len(pod.Status.PodIPs) == 0 && pod.Status.PodIP == "" {
			continue
		}
		ips := pod.Status.PodIPs
		if len(ips) == 0 {
			ips = []v1.PodIP{{IP: pod.Status.PodIP}}
		}
		ports := resolvePorts(svc, pod)
		ready := podutil.IsReady(pod)
		terminating := pod.DeletionTimestamp != nil
		ep := endpoint{pod: pod, serving: ready, terminating: terminating,
			ready: (ready && !terminating) || svc.Spec.PublishNotReadyAddresses}
		for _, ip := range ips {
			addr, err := netip.ParseAddr(ip.IP)
			if err != nil {
				continue
			}
			at := discoveryv1.AddressTypeIPv4
			if addr.Is6() {
				at = discoveryv1.AddressTypeIPv6
			}
			g := &group{addressType: at, ports: ports}
			k := g.key()
			if byKey[k] == nil {
				byKey[k] = g
				order = append(order, k)
			}
			e := ep
			e.ip = addr.String()
			byKey[k].endpoints = append(byKey[k].endpoints, e)
		}
	}
	slices.Sort(order)
	out := make([]*group, 0, len(order))
	for _, k := range order {
		g := byKey[k]
		slices.SortFunc(g.endpoints, func(a, b endpoint) int { return cmp.Compare(a.ip, b.ip) })
		out = append(out, g)
	}
	return out
}

// resolvePorts maps the Service's ports to this pod's ports: a numeric targetPort as is (the port
// number when unset), a named one through the pod's container ports with that name and protocol;
// ports the pod does not expose are left out for this pod.
func resolvePorts(svc *v1.Service, pod *v1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		var port int32
		switch {
		case sp.TargetPort.StrVal != "":
			port = findNamedPort(pod, sp.TargetPort.StrVal, sp.Protocol)
		case sp.TargetPort.IntVal != 0:
			port = sp.TargetPort.IntVal
		default:
			port = sp.Port
		}
		if port == 0 {
			continue
		}
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr(sp.Name), Protocol: &proto, Port: ptr(port), AppProtocol: sp.AppProtocol})
	}
	return out
}

func findNamedPort(pod *v1.Pod, name string, proto v1.Protocol) int32 {
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	for _, ctr := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, p := range ctr.Ports {
			pp := p.Protocol
			if pp == "" {
				pp = v1.ProtocolTCP
			}
			if p.Name == name && pp == proto {
				return p.ContainerPort
			}
		}
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

// desiredSlices builds the slices a Service should have: one per group, split every
// MaxEndpointsPerSlice endpoints.
func desiredSlices(svc *v1.Service, groups []*group) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, g := range groups {
		for start := 0; start < len(g.endpoints); start += MaxEndpointsPerSlice {
			chunk := g.endpoints[start:min(start+MaxEndpointsPerSlice, len(g.endpoints))]
			s := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					GenerateName:    svc.Name + "-",
					Namespace:       svc.Namespace,
					Labels:          sliceLabels(svc),
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
				},
				AddressType: g.addressType,
				Ports:       g.ports,
			}
			for _, e := range chunk {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
					Addresses: []string{e.ip},
					Conditions: discoveryv1.EndpointConditions{
						Ready: ptr(e.ready), Serving: ptr(e.serving), Terminating: ptr(e.terminating),
					},
					TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: e.pod.Namespace, Name: e.pod.Name, UID: e.pod.UID},
					NodeName:  nonEmpty(e.pod.Spec.NodeName),
					Hostname:  nonEmpty(podHostname(svc, e.pod)),
				})
			}
			out = append(out, s)
		}
	}
	return out
}

// podHostname is the DNS hostname the pod's endpoint carries in svc: spec.hostname when the pod's
// spec.subdomain names svc (in the pod's namespace), else "" — upstream's rule, which makes CoreDNS
// answer <hostname>.<service>.<ns>.svc.<domain> with the pod's address.
func podHostname(svc *v1.Service, pod *v1.Pod) string {
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		return pod.Spec.Hostname
	}
	return ""
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sliceLabels(svc *v1.Service) map[string]string {
	l := map[string]string{}
	for k, v := range svc.Labels {
		l[k] = v
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = ManagedBy
	return l
}

// syncSlices makes the Service's managed slices equal the desired ones, reusing existing slices of the
// same address type and ports (updated in place) before creating new ones, and deleting the rest.
func (c *Controller) syncSlices(ctx context.Context, svc *v1.Service, groups []*group) error {
	existing, err := c.ownedSlices(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	want := desiredSlices(svc, groups)
	keep, err := ApplySlices(ctx, c.client, existing, want)
	errs := []error{err}
	// An empty Service keeps one empty slice per address family it would use, like upstream keeps a
	// placeholder, so watchers see "no endpoints" rather than "not yet synced".
	if len(want) == 0 && len(existing) == 0 {
		placeholder := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: sliceLabels(svc),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, placeholder, metav1.CreateOptions{}); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if len(want) == 0 && len(existing) > 0 {
		// Keep one slice as the empty placeholder.
		keep[existing[0].Name] = true
		if len(existing[0].Endpoints) > 0 {
			upd := existing[0].DeepCopy()
			upd.Endpoints = nil
			if _, err := c.client.DiscoveryV1().EndpointSlices(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, c.deleteSlices(ctx, svc.Namespace, svc.Name, keep))
	return errors.Join(errs...)
}

// ApplySlices creates or updates slices so that each of want exists: an existing slice of the same
// address type and ports (taken once, in order) is updated in place to want's endpoints, labels and,
// when want sets them, annotations; a want without one is created. It returns the names of the
// existing slices it reused: the caller deletes the others. Errors name the slice; a failed write does
// not stop the others.
func ApplySlices(ctx context.Context, client kubernetes.Interface, existing, want []*discoveryv1.EndpointSlice) (map[string]bool, error) {
	used := make([]bool, len(existing))
	var errs []error
	for _, d := range want {
		match := -1
		for i, e := range existing {
			if !used[i] && e.AddressType == d.AddressType && equality.Semantic.DeepEqual(e.Ports, d.Ports) {
				match = i
				break
			}
		}
		if match < 0 {
			if _, err := client.DiscoveryV1().EndpointSlices(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("create endpointslice %s/%s*: %w", d.Namespace, d.GenerateName, err))
			}
			continue
		}
		used[match] = true
		e := existing[match]
		sameAnnotations := d.Annotations == nil || equality.Semantic.DeepEqual(e.Annotations, d.Annotations)
		if equality.Semantic.DeepEqual(e.Endpoints, d.Endpoints) && equality.Semantic.DeepEqual(e.Labels, d.Labels) && sameAnnotations {
			continue
		}
		upd := e.DeepCopy()
		upd.Endpoints, upd.Labels = d.Endpoints, d.Labels
		if d.Annotations != nil {
			upd.Annotations = d.Annotations
		}
		if _, err := client.DiscoveryV1().EndpointSlices(e.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("update endpointslice %s/%s: %w", e.Namespace, e.Name, err))
		}
	}
	keep := map[string]bool{}
	for i, e := range existing {
		if used[i] {
			keep[e.Name] = true
		}
	}
	return keep, errors.Join(errs...)
}

func (c *Controller) ownedSlices(ns, svcName string) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svcName, discoveryv1.LabelManagedBy: ManagedBy})
	list, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	return list, nil
}

// deleteSlices deletes the Service's managed slices whose names are not in keep.
func (c *Controller) deleteSlices(ctx context.Context, ns, svcName string, keep map[string]bool) error {
	list, err := c.ownedSlices(ns, svcName)
	if err != nil {
		return err
	}
	return DeleteSlices(ctx, c.client, list, keep)
}

// DeleteSlices deletes the slices of list whose names are not in keep (nil keeps none); slices
// already gone are not an error.
func DeleteSlices(ctx context.Context, client kubernetes.Interface, list []*discoveryv1.EndpointSlice, keep map[string]bool) error {
	var errs []error
	for _, s := range list {
		if keep[s.Name] {
			continue
		}
		err := client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete endpointslice %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// syncEndpoints writes the legacy Endpoints object: one subset per port group, ready endpoints in
// addresses and not-ready, non-terminating ones in notReadyAddresses.
func (c *Controller) syncEndpoints(ctx context.Context, svc *v1.Service, groups []*group) error {
	var subsets []v1.EndpointSubset
	for _, g := range groups {
		var ss v1.EndpointSubset
		for _, p := range g.ports {
			ss.Ports = append(ss.Ports, v1.EndpointPort{Name: deref(p.Name), Port: deref(p.Port), Protocol: deref(p.Protocol), AppProtocol: p.AppProtocol})
		}
		for _, e := range g.endpoints {
			addr := v1.EndpointAddress{IP: e.ip, Hostname: podHostname(svc, e.pod), NodeName: nonEmpty(e.pod.Spec.NodeName),
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: e.pod.Namespace, Name: e.pod.Name, UID: e.pod.UID}}
			switch {
			case e.ready:
				ss.Addresses = append(ss.Addresses, addr)
			case !e.terminating:
				ss.NotReadyAddresses = append(ss.NotReadyAddresses, addr)
			}
		}
		if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 && len(ss.Ports) > 0 {
			subsets = append(subsets, ss)
		}
	}
	labelsWant := map[string]string{}
	for k, v := range svc.Labels {
		labelsWant[k] = v
	}
	cur, err := c.endpoints.Endpoints(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		ep := &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: labelsWant}, Subsets: subsets}
		if _, err := c.client.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(cur.Subsets, subsets) && equality.Semantic.DeepEqual(cur.Labels, labelsWant) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Subsets, upd.Labels = subsets, labelsWant
	if _, err := c.client.CoreV1().Endpoints(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
