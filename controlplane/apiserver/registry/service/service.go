// Package service is the services resource (with /status). Creating a service allocates its ClusterIP
// from the service CIDR and, for NodePort and LoadBalancer services, a NodePort per port; deleting it
// releases them. Allocations live in etcd (package allocator), so restarts never hand a value out twice.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/allocator"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// Allocators are the service IP and node port ranges.
type Allocators struct {
	IPs, NodePorts *allocator.Range
}

// Fields returns a service's selectable fields beyond metadata.name and metadata.namespace: spec.clusterIP
// ("None" for a headless service) and spec.type, as kube-apiserver's service ToSelectableFields. kube-proxy
// lists and watches services with spec.clusterIP!=None.
func Fields(obj runtime.Object) fields.Set {
	s := obj.(*corev1.Service)
	return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
}

// NewStorage returns "services" and "services/status".
func NewStorage(getter generic.RESTOptionsGetter, alloc Allocators) (map[string]rest.Storage, error) {
	s := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.Service(o.(*corev1.Service)) })
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.ServiceUpdate(o.(*corev1.Service), old.(*corev1.Service))
	}
	s.PrepareUpdateFn = func(_ context.Context, o, old runtime.Object) {
		// Keep allocated values a client left out (kubectl replace, apply without them).
		n, p := o.(*corev1.Service), old.(*corev1.Service)
		if n.Spec.ClusterIP == "" && n.Spec.Type != corev1.ServiceTypeExternalName {
			n.Spec.ClusterIP, n.Spec.ClusterIPs = p.Spec.ClusterIP, p.Spec.ClusterIPs
		}
		if n.Spec.Type == corev1.ServiceTypeNodePort || n.Spec.Type == corev1.ServiceTypeLoadBalancer {
			for i := range n.Spec.Ports {
				if n.Spec.Ports[i].NodePort == 0 {
					for _, op := range p.Spec.Ports {
						if op.Port == n.Spec.Ports[i].Port && op.Protocol == n.Spec.Ports[i].Protocol {
							n.Spec.Ports[i].NodePort = op.NodePort
						}
					}
				}
			}
		}
	}
	main, status, err := store.New(getter, store.Spec{
		Resource:   corev1.Resource("services"),
		Singular:   "service",
		ShortNames: []string{"svc"},
		Categories: []string{"all"},
		NewFunc:    func() runtime.Object { return &corev1.Service{} },
		NewList:    func() runtime.Object { return &corev1.ServiceList{} },
		Strategy:   s,
		Fields:     Fields,
		Table:      table,
	})
	if err != nil {
		return nil, err
	}
	main.BeginCreate = func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		// A create of an existing name answers 409 AlreadyExists (not 422 for the ClusterIP or NodePort the
		// existing service holds). A consistent read (services are created rarely); a concurrent create
		// racing past it still fails safely, as allocations are per object uid.
		if name := obj.(*corev1.Service).Name; name != "" {
			if _, err := main.Get(ctx, name, &metav1.GetOptions{}); err == nil {
				return nil, apierrors.NewAlreadyExists(corev1.Resource("services"), name)
			}
		}
		return alloc.beginCreate(ctx, obj, options)
	}
	main.BeginUpdate = alloc.beginUpdate
	main.AfterDelete = alloc.afterDelete
	return map[string]rest.Storage{"services": main, "services/status": status}, nil
}

// owner names who holds an allocation: "namespace/name/uid". The uid makes each service object (and so
// each create request, which gets a fresh uid) a different owner: a create that loses to an existing or
// concurrent service of the same name never "re-claims" that service's values and then frees them when
// its own create fails.
func owner(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name + "/" + string(svc.UID) }

func usesNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

func usesClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// beginCreate allocates the ClusterIP and NodePorts; the returned finish releases them on failure.
func (a Allocators) beginCreate(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	svc := obj.(*corev1.Service)
	if len(options.DryRun) > 0 {
		return func(context.Context, bool) {}, nil
	}
	var taken []func()
	release := func() {
		for _, r := range taken {
			r()
		}
	}
	if usesClusterIP(svc) {
		ip, err := a.allocate(ctx, a.IPs, svc.Spec.ClusterIP, owner(svc), field.NewPath("spec", "clusterIP"), svc)
		if err != nil {
			return nil, err
		}
		taken = append(taken, func() { _ = a.IPs.Release(context.Background(), ip) })
		setClusterIP(svc, ip)
	}
	if usesNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			port, err := a.allocate(ctx, a.NodePorts, nodePortString(p.NodePort), owner(svc), field.NewPath("spec", "ports").Index(i).Child("nodePort"), svc)
			if err != nil {
				release()
				return nil, err
			}
			taken = append(taken, func() { _ = a.NodePorts.Release(context.Background(), port) })
			fmt.Sscan(port, &p.NodePort)
		}
	}
	return func(_ context.Context, success bool) {
		if !success {
			release()
		}
	}, nil
}

// beginUpdate allocates a ClusterIP for a service leaving ExternalName and NodePorts for ports gaining one
// and, once the update succeeded, releases the ClusterIP and NodePorts no longer used.
func (a Allocators) beginUpdate(ctx context.Context, obj, old runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
	if len(options.DryRun) > 0 {
		return func(context.Context, bool) {}, nil
	}
	// The ClusterIP follows a type change, as kube-apiserver's service strategy does: becoming
	// ExternalName drops the ClusterIP (the client may leave the old value in place) and releases it once
	// the update succeeded; leaving ExternalName allocates one.
	hadIP := usesClusterIP(prev) && prev.Spec.ClusterIP != ""
	if svc.Spec.Type == corev1.ServiceTypeExternalName && hadIP && (svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == prev.Spec.ClusterIP) {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
	}
	var freshIP string
	if !hadIP && usesClusterIP(svc) {
		ip, err := a.allocate(ctx, a.IPs, svc.Spec.ClusterIP, owner(prev), field.NewPath("spec", "clusterIP"), svc)
		if err != nil {
			return nil, err
		}
		freshIP = ip
		setClusterIP(svc, ip)
	}
	releaseIP := func(ctx context.Context, success bool) {
		switch {
		case !success && freshIP != "":
			_ = a.IPs.Release(ctx, freshIP)
		case success && hadIP && !usesClusterIP(svc):
			_ = a.IPs.Release(ctx, prev.Spec.ClusterIP)
		}
	}
	had := map[int32]bool{}
	if usesNodePorts(prev) {
		for _, p := range prev.Spec.Ports {
			had[p.NodePort] = true
		}
	}
	var fresh []string
	keep := map[int32]bool{}
	if usesNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 && had[p.NodePort] {
				keep[p.NodePort] = true
				continue
			}
			// The stored object's uid: the request body may omit metadata.uid (it is restored later).
			port, err := a.allocate(ctx, a.NodePorts, nodePortString(p.NodePort), owner(prev), field.NewPath("spec", "ports").Index(i).Child("nodePort"), svc)
			if err != nil {
				for _, f := range fresh {
					_ = a.NodePorts.Release(ctx, f)
				}
				releaseIP(context.Background(), false)
				return nil, err
			}
			fresh = append(fresh, port)
			fmt.Sscan(port, &p.NodePort)
		}
	} else {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	return func(ctx context.Context, success bool) {
		releaseIP(context.Background(), success)
		if !success {
			for _, f := range fresh {
				_ = a.NodePorts.Release(context.Background(), f)
			}
			return
		}
		for p := range had {
			if !keep[p] {
				_ = a.NodePorts.Release(context.Background(), nodePortString(p))
			}
		}
	}, nil
}

// afterDelete releases the service's ClusterIP and NodePorts.
func (a Allocators) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	svc := obj.(*corev1.Service)
	if options != nil && len(options.DryRun) > 0 {
		return
	}
	ctx := context.Background()
	if usesClusterIP(svc) && svc.Spec.ClusterIP != "" {
		_ = a.IPs.Release(ctx, svc.Spec.ClusterIP)
	}
	if usesNodePorts(svc) {
		for _, p := range svc.Spec.Ports {
			_ = a.NodePorts.Release(ctx, nodePortString(p.NodePort))
		}
	}
}

// setClusterIP records an allocated ClusterIP and its single-stack IP family.
func setClusterIP(svc *corev1.Service, ip string) {
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	if net.ParseIP(ip).To4() == nil {
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	}
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy = &single
}

// allocate takes want (or any free value when want is "") and maps allocator errors to 422 Invalid on path.
func (a Allocators) allocate(ctx context.Context, r *allocator.Range, want, who string, path *field.Path, svc *corev1.Service) (string, error) {
	if want == "" {
		v, err := r.Allocate(ctx, who)
		if errors.Is(err, allocator.ErrFull) {
			return "", invalid(svc, field.Invalid(path, want, err.Error()))
		}
		return v, err
	}
	err := r.AllocateSpecific(ctx, want, who)
	var nir *allocator.ErrNotInRange
	switch {
	case errors.As(err, &nir), errors.Is(err, allocator.ErrAllocated):
		return "", invalid(svc, field.Invalid(path, want, err.Error()))
	case err != nil:
		return "", apierrors.NewInternalError(err)
	}
	return want, nil
}

func invalid(svc *corev1.Service, e *field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{e})
}

func nodePortString(p int32) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprint(p)
}

var table = store.Table{
	Columns: []metav1.TableColumnDefinition{store.Column("Type", "service type"), store.Column("Cluster-IP", "cluster IP"),
		store.Column("Port(s)", "ports")},
	Cells: func(o runtime.Object) []any {
		s := o.(*corev1.Service)
		ports := ""
		for i, p := range s.Spec.Ports {
			if i > 0 {
				ports += ","
			}
			ports += fmt.Sprintf("%d", p.Port)
			if p.NodePort != 0 {
				ports += fmt.Sprintf(":%d", p.NodePort)
			}
			ports += "/" + string(p.Protocol)
		}
		ip := s.Spec.ClusterIP
		if ip == "" {
			ip = "<none>"
		}
		return []any{string(s.Spec.Type), ip, ports}
	},
}
