// Package podutil answers the pod questions several controllers ask: is it active, ready,
// and since when, and when does a ready pod count as available (Kubernetes pod lifecycle semantics).
package podutil

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/nodekit/nodekit/internal/podspec"
)

// IsActive reports whether the pod counts toward a controller's replicas: not finished and not being
// deleted.
func IsActive(p *v1.Pod) bool {
	return !podspec.IsTerminal(p.Status.Phase) && p.DeletionTimestamp == nil
}

// Condition returns the pod's condition of type t, or nil.
func Condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(p *v1.Pod) bool {
	c := Condition(p, v1.PodReady)
	return c != nil && c.Status == v1.ConditionTrue
}

// ReadySince returns the Ready condition's lastTransitionTime (zero when not ready).
func ReadySince(p *v1.Pod) time.Time {
	if c := Condition(p, v1.PodReady); c != nil && c.Status == v1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// AvailableIn returns 0 when a ready pod has been ready for at least minReady at now (it is
// available), otherwise how much longer it must stay ready. A pod whose Ready condition carries no
// transition time counts as ready since forever.
func AvailableIn(p *v1.Pod, minReady time.Duration, now time.Time) time.Duration {
	if minReady <= 0 {
		return 0
	}
	since := ReadySince(p)
	if since.IsZero() {
		return 0
	}
	if left := since.Add(minReady).Sub(now); left > 0 {
		return left
	}
	return 0
}

// TemplateHash is the hash controllers label their pods and revisions with (pod-template-hash,
// controller-revision-hash): FNV-32a over the template's JSON and the collision count, encoded with
// the safe alphabet upstream uses for generated names.
func TemplateHash(t *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(t)
	h.Write(b)
	if collisionCount != nil {
		h.Write([]byte(strconv.Itoa(int(*collisionCount))))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// FromTemplate returns a new pod of owner (of kind) from t, as upstream's GetPodFromTemplate: a copy of
// the template's labels (a map of its own, for the caller to add to), annotations, finalizers and spec,
// owner's namespace, and a controller ownerReference that blocks owner deletion in foreground mode. The
// caller names it (Name or GenerateName).
func FromTemplate(t *v1.PodTemplateSpec, owner metav1.Object, kind schema.GroupVersionKind) *v1.Pod {
	t = t.DeepCopy()
	labels := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		labels[k] = v
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			Labels:          labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)},
		},
		Spec: t.Spec,
	}
}
