package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applied is what Apply did with one object of a manifest.
type Applied struct {
	Kind, Namespace, Name string
	// Created is false when the object existed already (it is then left as it is, so a rerun of
	// `nodekit up` keeps the user's changes).
	Created bool
}

// Apply creates every object of a multi-document YAML manifest that does not exist yet, in order.
// Resources are resolved through the API server's discovery (so any kind it serves works); a namespaced
// object without a namespace goes to "default". Errors name the object.
func Apply(ctx context.Context, cfg *rest.Config, manifest []byte) ([]Applied, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("apply: discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []Applied
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("apply: decode manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return out, fmt.Errorf("apply: %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		a := Applied{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		_, err = ri.Create(ctx, &obj, metav1.CreateOptions{FieldManager: "nodekit-up"})
		switch {
		case err == nil:
			a.Created = true
		case apierrors.IsAlreadyExists(err):
		default:
			return out, fmt.Errorf("apply: create %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, a)
	}
}
