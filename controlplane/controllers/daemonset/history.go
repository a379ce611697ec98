package daemonset

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
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
)

// revisionPatch is the data of a DaemonSet's ControllerRevision as upstream writes it: a strategic
// merge patch that replaces spec.template, which `kubectl rollout undo` applies.
type revisionPatch struct {
	Spec struct {
		Template json.RawMessage `json:"template"`
	} `json:"spec"`
}

// revisionData encodes ds's template as a ControllerRevision's data.
func revisionData(ds *appsv1.DaemonSet) (runtime.RawExtension, error) {
	tmpl, err := json.Marshal(ds.Spec.Template)
	if err != nil {
		return runtime.RawExtension{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(tmpl, &m); err != nil {
		return runtime.RawExtension{}, err
	}
	m["$patch"] = "replace"
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
	return runtime.RawExtension{Raw: raw}, err
}

// revisionTemplate decodes the pod template a ControllerRevision holds.
func revisionTemplate(cr *appsv1.ControllerRevision) (*v1.PodTemplateSpec, error) {
	var p revisionPatch
	if err := json.Unmarshal(cr.Data.Raw, &p); err != nil {
		return nil, err
	}
	var t v1.PodTemplateSpec
	if err := json.Unmarshal(p.Spec.Template, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// matches reports whether cr holds ds's current template.
func matches(ds *appsv1.DaemonSet, cr *appsv1.ControllerRevision) bool {
	t, err := revisionTemplate(cr)
	return err == nil && equality.Semantic.DeepEqual(t, &ds.Spec.Template)
}

func maxRevision(revs []*appsv1.ControllerRevision) int64 {
	var n int64
	for _, r := range revs {
		n = max(n, r.Revision)
	}
	return n
}

// ensureRevision returns ds's current ControllerRevision, creating it ("<ds>-<hash>", revision
// max+1) or, when an older one holds the same template (a rollback), renumbering it max+1. On a name
// collision with a different template it bumps status.collisionCount and returns the error, so the
// next sync hashes differently (upstream semantics).
func (c *Controller) ensureRevision(ctx context.Context, ds *appsv1.DaemonSet, revs []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	top := maxRevision(revs)
	var cur []*appsv1.ControllerRevision
	for _, r := range revs {
		if matches(ds, r) {
			cur = append(cur, r)
		}
	}
	if len(cur) > 0 {
		sort.Slice(cur, func(i, j int) bool { return cur[i].Revision > cur[j].Revision })
		r := cur[0]
		if r.Revision < top {
			upd := r.DeepCopy()
			upd.Revision = top + 1
			return c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
		}
		return r, nil
	}
	data, err := revisionData(ds)
	if err != nil {
		return nil, err
	}
	hash := podutil.TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	labels := map[string]string{}
	for k, v := range ds.Spec.Template.Labels {
		labels[k] = v
	}
	labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name + "-" + hash, Namespace: ds.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Data: data, Revision: top + 1,
	}
	created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, cr, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	existing, gerr := c.client.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, cr.Name, metav1.GetOptions{})
	if gerr == nil && metav1.IsControlledBy(existing, ds) && matches(ds, existing) {
		return existing, nil
	}
	upd := ds.DeepCopy()
	n := int32(0)
	if upd.Status.CollisionCount != nil {
		n = *upd.Status.CollisionCount
	}
	n++
	upd.Status.CollisionCount = &n
	if _, uerr := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); uerr != nil {
		return nil, uerr
	}
	return nil, fmt.Errorf("controllerrevision %s/%s collides with another template: collisionCount now %d", ds.Namespace, cr.Name, n)
}

// cleanupHistory deletes the oldest revisions beyond spec.revisionHistoryLimit, never the current one
// nor one that a pod still runs.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, cur *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision, pods []*v1.Pod) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	live := map[string]bool{cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]: true}
	for _, p := range pods {
		live[p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if r.Name != cur.Name && !live[r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			old = append(old, r)
		}
	}
	if len(old) <= limit {
		return nil
	}
	sort.Slice(old, func(i, j int) bool { return old[i].Revision < old[j].Revision })
	for _, r := range old[:len(old)-limit] {
		err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
