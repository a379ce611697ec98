// Package plain holds the resources whose behaviour is the generic registry's plus validation alone:
// configmaps, secrets, serviceaccounts, endpoints, events, limitranges, podtemplates (core/v1), leases
// (coordination.k8s.io/v1) and endpointslices (discovery.k8s.io/v1).
package plain

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// Core returns the core/v1 plain resources keyed by resource name.
func Core(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return build(getter, []store.Spec{
		withUpdate(spec(corev1.Resource("configmaps"), "configmap", []string{"cm"}, func() runtime.Object { return &corev1.ConfigMap{} },
			func() runtime.Object { return &corev1.ConfigMapList{} },
			func(o runtime.Object) field.ErrorList { return validation.ConfigMap(o.(*corev1.ConfigMap)) }),
			func(o, old runtime.Object) field.ErrorList {
				return validation.ConfigMapUpdate(o.(*corev1.ConfigMap), old.(*corev1.ConfigMap))
			}),
		secrets(withUpdate(withFields(spec(corev1.Resource("secrets"), "secret", nil, func() runtime.Object { return &corev1.Secret{} },
			func() runtime.Object { return &corev1.SecretList{} },
			func(o runtime.Object) field.ErrorList { return validation.Secret(o.(*corev1.Secret)) }),
			func(o runtime.Object) fields.Set { return fields.Set{"type": string(o.(*corev1.Secret).Type)} }),
			func(o, old runtime.Object) field.ErrorList {
				return validation.SecretUpdate(o.(*corev1.Secret), old.(*corev1.Secret))
			})),
		spec(corev1.Resource("serviceaccounts"), "serviceaccount", []string{"sa"}, func() runtime.Object { return &corev1.ServiceAccount{} },
			func() runtime.Object { return &corev1.ServiceAccountList{} },
			func(o runtime.Object) field.ErrorList { return validation.ServiceAccount(o.(*corev1.ServiceAccount)) }),
		spec(corev1.Resource("endpoints"), "endpoints", []string{"ep"}, func() runtime.Object { return &corev1.Endpoints{} },
			func() runtime.Object { return &corev1.EndpointsList{} },
			func(o runtime.Object) field.ErrorList { return validation.Endpoints(o.(*corev1.Endpoints)) }),
		withFields(spec(corev1.Resource("events"), "event", []string{"ev"}, func() runtime.Object { return &corev1.Event{} },
			func() runtime.Object { return &corev1.EventList{} },
			func(o runtime.Object) field.ErrorList { return validation.Event(o.(*corev1.Event)) }), eventFields),
		spec(corev1.Resource("limitranges"), "limitrange", []string{"limits"}, func() runtime.Object { return &corev1.LimitRange{} },
			func() runtime.Object { return &corev1.LimitRangeList{} },
			func(o runtime.Object) field.ErrorList { return validation.LimitRange(o.(*corev1.LimitRange)) }),
		podTemplates(spec(corev1.Resource("podtemplates"), "podtemplate", nil, func() runtime.Object { return &corev1.PodTemplate{} },
			func() runtime.Object { return &corev1.PodTemplateList{} },
			func(o runtime.Object) field.ErrorList { return validation.PodTemplate(o.(*corev1.PodTemplate)) })),
	})
}

// podTemplates gives PodTemplates kube-apiserver's generation rule: 1 at create, one more on every
// update that changes the template.
func podTemplates(s store.Spec) store.Spec {
	s.Strategy.PrepareCreateFn = func(_ context.Context, obj runtime.Object) { obj.(*corev1.PodTemplate).Generation = 1 }
	s.Strategy.PrepareUpdateFn = func(_ context.Context, obj, old runtime.Object) {
		pt, prev := obj.(*corev1.PodTemplate), old.(*corev1.PodTemplate)
		pt.Generation = prev.Generation
		if !equality.Semantic.DeepEqual(pt.Template, prev.Template) {
			pt.Generation++
		}
	}
	return s
}

// Coordination returns coordination.k8s.io/v1 leases.
func Coordination(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return build(getter, []store.Spec{
		spec(coordinationv1.Resource("leases"), "lease", nil, func() runtime.Object { return &coordinationv1.Lease{} },
			func() runtime.Object { return &coordinationv1.LeaseList{} },
			func(o runtime.Object) field.ErrorList { return validation.Lease(o.(*coordinationv1.Lease)) }),
	})
}

// Discovery returns discovery.k8s.io/v1 endpointslices.
func Discovery(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := spec(discoveryv1.Resource("endpointslices"), "endpointslice", nil, func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		func(o runtime.Object) field.ErrorList {
			return validation.EndpointSlice(o.(*discoveryv1.EndpointSlice))
		})
	s.Table = endpointSliceTable
	return build(getter, []store.Spec{s})
}

func spec(gr schema.GroupResource, singular string, short []string, newFn, newList func() runtime.Object, v func(runtime.Object) field.ErrorList) store.Spec {
	return store.Spec{Resource: gr, Singular: singular, ShortNames: short, NewFunc: newFn, NewList: newList,
		Strategy: store.NewStrategy(true, false, v)}
}

// secrets merges a Secret's write-only stringData into data (stringData wins) on create and update, as
// kube-apiserver's Secret conversion does, so stringData is never stored.
func secrets(s store.Spec) store.Spec {
	merge := func(_ context.Context, obj runtime.Object) {
		sec := obj.(*corev1.Secret)
		for k, v := range sec.StringData {
			if sec.Data == nil {
				sec.Data = map[string][]byte{}
			}
			sec.Data[k] = []byte(v)
		}
		sec.StringData = nil
	}
	s.Strategy.PrepareCreateFn = merge
	s.Strategy.PrepareUpdateFn = func(ctx context.Context, obj, _ runtime.Object) { merge(ctx, obj) }
	return s
}

// withUpdate sets the update validation (create validation stays ValidateFn).
func withUpdate(s store.Spec, v func(obj, old runtime.Object) field.ErrorList) store.Spec {
	s.Strategy.ValidateUpdateFn = v
	return s
}

func withFields(s store.Spec, f func(runtime.Object) fields.Set) store.Spec {
	s.Fields = f
	return s
}

func build(getter generic.RESTOptionsGetter, specs []store.Spec) (map[string]rest.Storage, error) {
	m := map[string]rest.Storage{}
	for _, s := range specs {
		r, _, err := store.New(getter, s)
		if err != nil {
			return nil, err
		}
		m[s.Resource.Resource] = r
	}
	return m, nil
}

func eventFields(o runtime.Object) fields.Set {
	e := o.(*corev1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}
