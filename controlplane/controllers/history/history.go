// Package history is the ControllerRevision history the DaemonSet and StatefulSet controllers keep
// (upstream pkg/controller/history and the controllers' use of it): one revision per pod template,
// named "<owner>-<hash>" and labelled controller-revision-hash=<hash>, its data a strategic merge
// patch that replaces spec.template (what `kubectl rollout undo` applies), numbered so that the newest
// template has the highest revision; a rollback to an older template renumbers that revision; and the
// oldest revisions no pod runs are deleted beyond revisionHistoryLimit.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
)

// HashLabel is the label holding a revision's (and its pods') template hash; DaemonSets and StatefulSets
// share the key (appsv1.DefaultDaemonSetUniqueLabelKey == appsv1.ControllerRevisionHashLabelKey).
const HashLabel = appsv1.ControllerRevisionHashLabelKey

// DefaultLimit is revisionHistoryLimit when the owner leaves it unset.
const DefaultLimit = 10

// Owner is the workload a history belongs to.
type Owner struct {
	// Object is the DaemonSet or StatefulSet.
	Object metav1.Object
	// Kind is its group, version and kind (for the controller ownerReference).
	Kind schema.GroupVersionKind
	// Template is its current pod template.
	Template *v1.PodTemplateSpec
	// CollisionCount is its status.collisionCount (nil: 0).
	CollisionCount *int32
	// SetCollisionCount writes status.collisionCount = n on the owner.
	SetCollisionCount func(ctx context.Context, n int32) error
}

type revisionPatch struct {
	Spec struct {
		Template json.RawMessage `json:"template"`
	} `json:"spec"`
}

// Data encodes tmpl as a ControllerRevision's data: {"spec":{"template":{...,"$patch":"replace"}}}.
func Data(tmpl *v1.PodTemplateSpec) (runtime.RawExtension, error) {
	raw, err := json.Marshal(tmpl)
	if err != nil {
		return runtime.RawExtension{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return runtime.RawExtension{}, err
	}
	m["$patch"] = "replace"
	out, err := json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
	return runtime.RawExtension{Raw: out}, err
}

// Template decodes the pod template a ControllerRevision holds; an error means data that is not a
// template patch.
func Template(cr *appsv1.ControllerRevision) (*v1.PodTemplateSpec, error) {
	var p revisionPatch
	if err := json.Unmarshal(cr.Data.Raw, &p); err != nil {
		return nil, fmt.Errorf("controllerrevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	var t v1.PodTemplateSpec
	if err := json.Unmarshal(p.Spec.Template, &t); err != nil {
		return nil, fmt.Errorf("controllerrevision %s/%s: template: %w", cr.Namespace, cr.Name, err)
	}
	return &t, nil
}

// Matches reports whether cr holds tmpl.
func Matches(tmpl *v1.PodTemplateSpec, cr *appsv1.ControllerRevision) bool {
	t, err := Template(cr)
	return err == nil && equality.Semantic.DeepEqual(t, tmpl)
}

// List returns the ControllerRevisions in owner's namespace that match selector and that owner controls.
func List(lister appslisters.ControllerRevisionLister, owner metav1.Object, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := lister.ControllerRevisions(owner.GetNamespace()).List(selector)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, r := range all {
		if metav1.IsControlledBy(r, owner) {
			out = append(out, r)
		}
	}
	return out, nil
}

func maxRevision(revs []*appsv1.ControllerRevision) int64 {
	var n int64
	for _, r := range revs {
		n = max(n, r.Revision)
	}
	return n
}

// Ensure returns the ControllerRevision of o's current template, creating it ("<owner>-<hash>",
// revision max+1) or, when an older one holds the same template (a rollback), renumbering it max+1.
// On a name collision with a different template it bumps status.collisionCount and returns an error,
// so the next sync hashes differently (upstream semantics).
func Ensure(ctx context.Context, client kubernetes.Interface, o Owner, revs []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	ns := o.Object.GetNamespace()
	top := maxRevision(revs)
	var cur []*appsv1.ControllerRevision
	for _, r := range revs {
		if Matches(o.Template, r) {
			cur = append(cur, r)
		}
	}
	if len(cur) > 0 {
		sort.Slice(cur, func(i, j int) bool { return cur[i].Revision > cur[j].Revision })
		r := cur[0]
		if r.Revision < top {
			upd := r.DeepCopy()
			upd.Revision = top + 1
			return client.AppsV1().ControllerRevisions(ns).Update(ctx, upd, metav1.UpdateOptions{})
		}
		return r, nil
	}
	data, err := Data(o.Template)
	if err != nil {
		return nil, err
	}
	hash := podutil.TemplateHash(o.Template, o.CollisionCount)
	lbls := map[string]string{}
	for k, v := range o.Template.Labels {
		lbls[k] = v
	}
	lbls[HashLabel] = hash
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Object.GetName() + "-" + hash, Namespace: ns, Labels: lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(o.Object, o.Kind)},
		},
		Data: data, Revision: top + 1,
	}
	created, err := client.AppsV1().ControllerRevisions(ns).Create(ctx, cr, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	existing, gerr := client.AppsV1().ControllerRevisions(ns).Get(ctx, cr.Name, metav1.GetOptions{})
	if gerr == nil && metav1.IsControlledBy(existing, o.Object) && Matches(o.Template, existing) {
		return existing, nil
	}
	n := int32(0)
	if o.CollisionCount != nil {
		n = *o.CollisionCount
	}
	n++
	if err := o.SetCollisionCount(ctx, n); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("controllerrevision %s/%s collides with another template: collisionCount now %d", ns, cr.Name, n)
}

// Cleanup deletes the oldest revisions beyond limit (nil: DefaultLimit), never one named in live
// (the current and update revisions) nor one a pod of pods still runs (its controller-revision-hash label
// holds the revision's hash, as DaemonSet pods', or its name, as StatefulSet pods').
func Cleanup(ctx context.Context, client kubernetes.Interface, limit *int32, revs []*appsv1.ControllerRevision, pods []*v1.Pod, live ...*appsv1.ControllerRevision) error {
	keep := DefaultLimit
	if limit != nil {
		keep = int(*limit)
	}
	liveHash, liveName := map[string]bool{}, map[string]bool{}
	for _, r := range live {
		if r != nil {
			liveName[r.Name] = true
		}
	}
	for _, p := range pods {
		liveHash[p.Labels[HashLabel]] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !liveName[r.Name] && !liveHash[r.Labels[HashLabel]] && !liveHash[r.Name] {
			old = append(old, r)
		}
	}
	if len(old) <= keep {
		return nil
	}
	sort.Slice(old, func(i, j int) bool { return old[i].Revision < old[j].Revision })
	for _, r := range old[:len(old)-keep] {
		err := client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
