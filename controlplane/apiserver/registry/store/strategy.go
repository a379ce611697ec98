// Package store builds a k8s.io/apiserver generic registry Store for one resource from a small Spec: the
// object's Go type, its scope, its validation and its optional spec/status split. Resource packages
// (registry/pod, registry/service, ...) add their own behaviour on top of the Store this returns.
package store

import (
	"context"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/nodekit/nodekit/controlplane/apiserver/scheme"
)

// Strategy implements the create, update and delete strategies of the generic registry for one resource.
//
// When the object has both a Spec and a Status field (HasStatus), Kubernetes' spec/status split applies:
// the main resource ignores status changes on update (create keeps the status a client sent only when
// KeepStatusOnCreate), the /status subresource (StatusStrategy) ignores everything but status, and
// metadata.generation starts at 1 and is bumped whenever spec changes.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator

	Namespaced bool
	HasStatus  bool
	// KeepStatusOnCreate keeps a client-set status on create (for example Nodes registered with
	// addresses). Otherwise status is reset to its zero value.
	KeepStatusOnCreate bool
	// Validate checks a new object (metadata basics are checked by the generic registry). Required.
	ValidateFn func(obj runtime.Object) field.ErrorList
	// ValidateUpdateFn checks an update; nil means ValidateFn on the new object.
	ValidateUpdateFn func(obj, old runtime.Object) field.ErrorList
	// PrepareCreateFn and PrepareUpdateFn clear or set server-owned fields (optional).
	PrepareCreateFn func(ctx context.Context, obj runtime.Object)
	PrepareUpdateFn func(ctx context.Context, obj, old runtime.Object)
	// GracefulDeleteFn decides the deletion grace period (optional; nil deletes immediately).
	GracefulDeleteFn func(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool
}

// NamespaceScoped reports whether objects live in a namespace.
func (s *Strategy) NamespaceScoped() bool { return s.Namespaced }

// PrepareForCreate resets status (unless kept) and sets generation 1.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.HasStatus {
		if !s.KeepStatusOnCreate {
			zeroField(obj, "Status")
		}
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.PrepareCreateFn != nil {
		s.PrepareCreateFn(ctx, obj)
	}
}

// PrepareForUpdate keeps the stored status and bumps generation when spec changed.
func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.HasStatus {
		copyField(obj, old, "Status")
		bumpGeneration(obj, old)
	}
	if s.PrepareUpdateFn != nil {
		s.PrepareUpdateFn(ctx, obj, old)
	}
}

// Validate runs the resource's validation.
func (s *Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return s.ValidateFn(obj)
}

// ValidateUpdate runs the resource's update validation.
func (s *Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	if s.ValidateUpdateFn != nil {
		return s.ValidateUpdateFn(obj, old)
	}
	return s.ValidateFn(obj)
}

// WarningsOnCreate returns no warnings.
func (s *Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

// WarningsOnUpdate returns no warnings.
func (s *Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// Canonicalize leaves objects as they are.
func (s *Strategy) Canonicalize(runtime.Object) {}

// AllowCreateOnUpdate is false: PUT on a missing object is 404, as for most Kubernetes resources.
func (s *Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

// AllowUnconditionalUpdate allows updates without a resourceVersion (last writer wins), as Kubernetes does.
func (s *Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

// CheckGracefulDelete delegates to GracefulDeleteFn.
func (s *Strategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if s.GracefulDeleteFn == nil {
		return false
	}
	return s.GracefulDeleteFn(ctx, obj, options)
}

// StatusMetadata says which metadata a /status update may change, as the resource's upstream status
// strategy does (k8s.io/kubernetes pkg/registry/<group>/<resource>/strategy.go).
type StatusMetadata int

const (
	// StatusKeepsRequestMetadata: the request's labels, annotations, finalizers and owner references
	// are stored (upstream's classic resources: pods, services, nodes, namespaces, workloads, jobs,
	// quotas, claims, disruption budgets, ingresses, CSRs); only spec and generation are kept.
	StatusKeepsRequestMetadata StatusMetadata = iota
	// StatusResetsLabels: as StatusKeepsRequestMetadata, but the stored labels are kept (Deployments).
	StatusResetsLabels
	// StatusResetsOwnership: as StatusKeepsRequestMetadata, but the stored deletion timestamp and owner
	// references are kept (pods: old kubelets corrupted owner references through pods/status).
	StatusResetsOwnership
	// StatusResetsObjectMeta: metav1.ResetObjectMetaForStatus — labels, annotations, finalizers,
	// owner references, deletion timestamp and generation are the stored ones (the newer APIs:
	// ValidatingAdmissionPolicy, ServiceCIDR, StorageVersionMigration).
	StatusResetsObjectMeta
	// StatusKeepsStoredObjectMeta: the whole stored metadata is kept (flowcontrol).
	StatusKeepsStoredObjectMeta
)

// StatusStrategy is the /status subresource's update strategy: status changes, spec never does, and
// metadata as Metadata says.
type StatusStrategy struct {
	*Strategy
	// ValidateStatusFn checks a status update (optional).
	ValidateStatusFn func(obj, old runtime.Object) field.ErrorList
	// Metadata is the metadata policy (default StatusKeepsRequestMetadata).
	Metadata StatusMetadata
}

// PrepareForUpdate copies the stored spec onto the new object, and the stored metadata as s.Metadata
// says.
func (s *StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	copyField(obj, old, "Spec")
	nm, err1 := meta.Accessor(obj)
	om, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return
	}
	nm.SetGeneration(om.GetGeneration())
	switch s.Metadata {
	case StatusResetsLabels:
		nm.SetLabels(om.GetLabels())
	case StatusResetsOwnership:
		nm.SetDeletionTimestamp(om.GetDeletionTimestamp())
		nm.SetOwnerReferences(om.GetOwnerReferences())
	case StatusResetsObjectMeta:
		metav1.ResetObjectMetaForStatus(nm, om)
	case StatusKeepsStoredObjectMeta:
		copyField(obj, old, "ObjectMeta")
	}
}

// ValidateUpdate runs ValidateStatusFn.
func (s *StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	if s.ValidateStatusFn == nil {
		return nil
	}
	return s.ValidateStatusFn(obj, old)
}

// NewStrategy returns a Strategy over the API server's scheme with the standard generateName generator.
func NewStrategy(namespaced, hasStatus bool, validate func(runtime.Object) field.ErrorList) *Strategy {
	return &Strategy{ObjectTyper: scheme.Scheme, NameGenerator: names.SimpleNameGenerator,
		Namespaced: namespaced, HasStatus: hasStatus, ValidateFn: validate}
}

func field0(obj runtime.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		return reflect.Value{}
	}
	return v.Elem().FieldByName(name)
}

func zeroField(obj runtime.Object, name string) {
	if f := field0(obj, name); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

func copyField(dst, src runtime.Object, name string) {
	d, s := field0(dst, name), field0(src, name)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

func bumpGeneration(obj, old runtime.Object) {
	n, o := field0(obj, "Spec"), field0(old, "Spec")
	if !n.IsValid() || !o.IsValid() {
		return
	}
	nm, err1 := meta.Accessor(obj)
	om, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return
	}
	nm.SetGeneration(om.GetGeneration())
	if !apiequality.Semantic.DeepEqual(n.Interface(), o.Interface()) {
		nm.SetGeneration(om.GetGeneration() + 1)
	}
}
