package store

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Spec describes one resource.
type Spec struct {
	// Resource is the plural group/resource, for example {Group: "apps", Resource: "deployments"}.
	Resource schema.GroupResource
	// Singular is the singular name ("deployment").
	Singular string
	// ShortNames and Categories appear in discovery (kubectl get po, kubectl get all).
	ShortNames []string
	Categories []string
	NewFunc    func() runtime.Object
	NewList    func() runtime.Object
	Strategy   *Strategy
	// StatusValidate, when the strategy HasStatus, validates /status updates (optional).
	StatusValidate func(obj, old runtime.Object) field.ErrorList
	// StatusMetadata is what metadata a /status update may change (default: all but generation, as
	// upstream's classic resources).
	StatusMetadata StatusMetadata
	// Fields returns the selectable fields beyond metadata.name/namespace (optional).
	Fields func(obj runtime.Object) fields.Set
	// Table renders `kubectl get` columns (optional; default NAME and CREATED AT).
	Table rest.TableConvertor
}

// REST is a resource's main endpoint: the generic Store plus discovery names.
type REST struct {
	*genericregistry.Store
	shortNames, categories []string
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories implements rest.CategoriesProvider.
func (r *REST) Categories() []string { return r.categories }

// StatusREST is the /status subresource: get, and update/patch of status only.
type StatusREST struct {
	store *genericregistry.Store
}

// New returns an empty object of the resource.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy is a no-op: the main store owns the storage.
func (r *StatusREST) Destroy() {}

// Get returns the object.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update changes the object's status only; it never creates.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields reports no reset fields (server-side apply field ownership is not tracked per subresource).
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return nil }

// ConvertToTable renders the object like the main resource.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// New builds the resource's Store over the options getter (etcd3 storage with watch cache) and, when the
// strategy has a status, its /status endpoint (nil otherwise).
func New(getter generic.RESTOptionsGetter, spec Spec) (*REST, *StatusREST, error) {
	attrs := AttrFunc(spec.Strategy.Namespaced, spec.Fields)
	s := &genericregistry.Store{
		NewFunc:                   spec.NewFunc,
		NewListFunc:               spec.NewList,
		DefaultQualifiedResource:  spec.Resource,
		SingularQualifiedResource: schema.GroupResource{Group: spec.Resource.Group, Resource: spec.Singular},
		PredicateFunc: func(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: attrs}
		},
		CreateStrategy: spec.Strategy,
		UpdateStrategy: spec.Strategy,
		DeleteStrategy: spec.Strategy,
		TableConvertor: spec.Table,
	}
	if s.TableConvertor == nil {
		s.TableConvertor = rest.NewDefaultTableConvertor(spec.Resource)
	}
	if err := s.CompleteWithOptions(&generic.StoreOptions{RESTOptions: getter, AttrFunc: attrs}); err != nil {
		return nil, nil, fmt.Errorf("registry %s: %w", spec.Resource, err)
	}
	main := &REST{Store: s, shortNames: spec.ShortNames, categories: spec.Categories}
	if !spec.Strategy.HasStatus {
		return main, nil, nil
	}
	return main, Subresource(main, &StatusStrategy{Strategy: spec.Strategy, ValidateStatusFn: spec.StatusValidate, Metadata: spec.StatusMetadata}), nil
}

// Subresource returns a get/update endpoint over main's storage whose updates go through strategy
// instead of main's (for example /status, or a CertificateSigningRequest's /approval). It never creates
// or deletes.
func Subresource(main *REST, strategy rest.RESTUpdateStrategy) *StatusREST {
	st := *main.Store
	st.UpdateStrategy = strategy
	st.CreateStrategy = nil
	st.DeleteStrategy = nil
	return &StatusREST{store: &st}
}

// AttrFunc returns the labels and selectable fields of an object: metadata.name, metadata.namespace (when
// namespaced) and extra's fields.
func AttrFunc(namespaced bool, extra func(runtime.Object) fields.Set) storage.AttrFunc {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		fs := fields.Set{"metadata.name": m.GetName()}
		if namespaced {
			fs["metadata.namespace"] = m.GetNamespace()
		}
		if extra != nil {
			fs = generic.MergeFieldsSets(fs, extra(obj))
		}
		return labels.Set(m.GetLabels()), fs, nil
	}
}
