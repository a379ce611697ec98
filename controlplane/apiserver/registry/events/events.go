// Package events is the events.k8s.io/v1 events resource. As in kube-apiserver, it is a second view of
// the core/v1 events storage (/registry/events): an events.k8s.io Event is converted to a core Event on
// the way in and back on the way out, so `kubectl get events` and the core event field selectors see
// events that recorders such as kube-proxy's post to events.k8s.io, and the reverse.
//
// Field mapping (Kubernetes' events v1 ↔ core conversion): regarding ↔ involvedObject, note ↔ message,
// deprecatedSource ↔ source, deprecatedFirstTimestamp/LastTimestamp/Count ↔ firstTimestamp/lastTimestamp/
// count; the other fields share names.
package events

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// REST serves events.k8s.io/v1 events over the core/v1 events store.
type REST struct {
	core *store.REST
}

// NewStorage returns "events" for the events.k8s.io/v1 group over core, the core/v1 events store.
func NewStorage(core *store.REST) map[string]rest.Storage {
	return map[string]rest.Storage{"events": &REST{core: core}}
}

var (
	_ rest.StandardStorage = &REST{}
	_ rest.TableConvertor  = &REST{}
)

// New returns an empty events.k8s.io/v1 Event.
func (r *REST) New() runtime.Object { return &eventsv1.Event{} }

// NewList returns an empty EventList.
func (r *REST) NewList() runtime.Object { return &eventsv1.EventList{} }

// Destroy is a no-op: the core store owns the storage.
func (r *REST) Destroy() {}

// NamespaceScoped is true: events live in namespaces.
func (r *REST) NamespaceScoped() bool { return true }

// GetSingularName is "event".
func (r *REST) GetSingularName() string { return "event" }

// ShortNames is "ev", as kube-apiserver's.
func (r *REST) ShortNames() []string { return []string{"ev"} }

// Create stores e as a core Event; createValidation (admission) sees the events.k8s.io form.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	out, err := r.core.Create(ctx, ToCore(obj.(*eventsv1.Event)), validating(createValidation), options)
	return fromCoreObject(out, err)
}

// Get returns the event.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return fromCoreObject(r.core.Get(ctx, name, options))
}

// List returns the events matching options (labels, metadata.name and metadata.namespace fields).
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.core.List(ctx, options)
	if err != nil {
		return nil, err
	}
	cl := obj.(*corev1.EventList)
	l := &eventsv1.EventList{ListMeta: cl.ListMeta, Items: make([]eventsv1.Event, len(cl.Items))}
	for i := range cl.Items {
		l.Items[i] = *FromCore(&cl.Items[i])
	}
	return l, nil
}

// Watch streams the events in the events.k8s.io form.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	w, err := r.core.Watch(ctx, options)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		obj := ev.Object
		if c, ok := obj.(runtime.CacheableObject); ok { // the watch cache's shared, serialization-caching wrapper
			obj = c.GetObject()
		}
		if e, ok := obj.(*corev1.Event); ok {
			ev.Object = FromCore(e.DeepCopy())
		}
		return ev, true
	}), nil
}

// Update applies objInfo (a PUT body or a patch, over the events.k8s.io form of the stored event).
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	var validateUpdate rest.ValidateObjectUpdateFunc
	if updateValidation != nil {
		validateUpdate = func(ctx context.Context, obj, old runtime.Object) error {
			return updateValidation(ctx, FromCore(obj.(*corev1.Event)), FromCore(old.(*corev1.Event)))
		}
	}
	out, created, err := r.core.Update(ctx, name, updatedInfo{objInfo}, validating(createValidation), validateUpdate, forceAllowCreate, options)
	obj, err := fromCoreObject(out, err)
	return obj, created, err
}

// Delete deletes the event.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	out, done, err := r.core.Delete(ctx, name, validating(deleteValidation), options)
	obj, err := fromCoreObject(out, err)
	return obj, done, err
}

// DeleteCollection deletes the events matching listOptions.
func (r *REST) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions,
	listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	if _, err := r.core.DeleteCollection(ctx, validating(deleteValidation), options, listOptions); err != nil {
		return nil, err
	}
	return &eventsv1.EventList{}, nil
}

// ConvertToTable renders the events like the core resource.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	switch o := object.(type) {
	case *eventsv1.Event:
		object = ToCore(o)
	case *eventsv1.EventList:
		l := &corev1.EventList{ListMeta: o.ListMeta, Items: make([]corev1.Event, len(o.Items))}
		for i := range o.Items {
			l.Items[i] = *ToCore(&o.Items[i])
		}
		object = l
	}
	return r.core.ConvertToTable(ctx, object, tableOptions)
}

// updatedInfo presents the stored core Event to objInfo in the events.k8s.io form and converts its result back.
type updatedInfo struct{ rest.UpdatedObjectInfo }

func (u updatedInfo) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	if e, ok := old.(*corev1.Event); ok {
		old = FromCore(e)
	}
	obj, err := u.UpdatedObjectInfo.UpdatedObject(ctx, old)
	if err != nil {
		return nil, err
	}
	return ToCore(obj.(*eventsv1.Event)), nil
}

// validating runs v (admission's validation) over the events.k8s.io form of a core Event.
func validating(v rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	if v == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error { return v(ctx, FromCore(obj.(*corev1.Event))) }
}

func fromCoreObject(obj runtime.Object, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	if e, ok := obj.(*corev1.Event); ok {
		return FromCore(e), nil
	}
	return obj, nil
}

// ToCore converts an events.k8s.io/v1 Event to the core/v1 Event stored for it.
func ToCore(e *eventsv1.Event) *corev1.Event {
	c := &corev1.Event{
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Related:             e.Related,
		Action:              e.Action,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if s := e.Series; s != nil {
		c.Series = &corev1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return c
}

// FromCore converts a stored core/v1 Event to its events.k8s.io/v1 form.
func FromCore(c *corev1.Event) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta:               c.ObjectMeta,
		Regarding:                c.InvolvedObject,
		Reason:                   c.Reason,
		Note:                     c.Message,
		DeprecatedSource:         c.Source,
		DeprecatedFirstTimestamp: c.FirstTimestamp,
		DeprecatedLastTimestamp:  c.LastTimestamp,
		DeprecatedCount:          c.Count,
		Type:                     c.Type,
		EventTime:                c.EventTime,
		Related:                  c.Related,
		Action:                   c.Action,
		ReportingController:      c.ReportingController,
		ReportingInstance:        c.ReportingInstance,
	}
	if s := c.Series; s != nil {
		e.Series = &eventsv1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return e
}
