package namespace

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// conditionTypes are the deletion conditions the controller maintains on a terminating namespace, in
// Kubernetes' order. Each one is False with its ok reason and message while nothing is wrong.
var conditionTypes = []v1.NamespaceConditionType{
	v1.NamespaceDeletionDiscoveryFailure,
	v1.NamespaceDeletionGVParsingFailure,
	v1.NamespaceDeletionContentFailure,
	v1.NamespaceContentRemaining,
	v1.NamespaceFinalizersRemaining,
}

// okConditions are Kubernetes' reasons and messages of the False (nothing wrong) conditions.
var okConditions = map[v1.NamespaceConditionType][2]string{
	v1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	v1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	v1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	v1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	v1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// deletion is what one pass over a terminating namespace found: the delete or list calls that failed,
// the objects left per resource and the finalizers they are held by.
type deletion struct {
	// discoveryErr is the error of listing the namespaced resources (nil when discovery answered).
	discoveryErr error
	errs         []error
	remaining    map[schema.GroupResource]int
	finalizers   map[string]int
}

func newDeletion() *deletion {
	return &deletion{remaining: map[schema.GroupResource]int{}, finalizers: map[string]int{}}
}

// left is how many objects the pass saw remaining.
func (d *deletion) left() int {
	n := 0
	for _, c := range d.remaining {
		n += c
	}
	return n
}

// conditions returns the five deletion conditions for what the pass found, with Kubernetes' reasons and
// messages (True when something failed or remains).
func (d *deletion) conditions() []v1.NamespaceCondition {
	failed := map[v1.NamespaceConditionType][2]string{}
	if d.discoveryErr != nil {
		failed[v1.NamespaceDeletionDiscoveryFailure] = [2]string{"DiscoveryFailed", "Discovery failed for some groups: " + d.discoveryErr.Error()}
	}
	if len(d.errs) > 0 {
		msgs := make([]string, 0, len(d.errs))
		for _, err := range d.errs {
			msgs = append(msgs, err.Error())
		}
		slices.Sort(msgs)
		failed[v1.NamespaceDeletionContentFailure] = [2]string{"ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", "))}
	}
	var left, held []string
	for gr, n := range d.remaining {
		if n > 0 {
			left = append(left, fmt.Sprintf("%s.%s has %d resource instances", gr.Resource, gr.Group, n))
		}
	}
	for f, n := range d.finalizers {
		held = append(held, fmt.Sprintf("%s in %d resource instances", f, n))
	}
	if len(left) > 0 {
		slices.Sort(left)
		failed[v1.NamespaceContentRemaining] = [2]string{"SomeResourcesRemain", "Some resources are remaining: " + strings.Join(left, ", ")}
	}
	if len(held) > 0 {
		slices.Sort(held)
		failed[v1.NamespaceFinalizersRemaining] = [2]string{"SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: " + strings.Join(held, ", ")}
	}
	out := make([]v1.NamespaceCondition, 0, len(conditionTypes))
	for _, t := range conditionTypes {
		c := v1.NamespaceCondition{Type: t, Status: v1.ConditionFalse, Reason: okConditions[t][0], Message: okConditions[t][1]}
		if f, ok := failed[t]; ok {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, f[0], f[1]
		}
		out = append(out, c)
	}
	return out
}

// setConditions merges want into status.conditions: a condition whose status, reason or message changed
// is rewritten (its lastTransitionTime set to now when the status flipped), a missing one is added with
// now. It reports whether anything changed.
func setConditions(status *v1.NamespaceStatus, want []v1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := slices.IndexFunc(status.Conditions, func(c v1.NamespaceCondition) bool { return c.Type == w.Type })
		if i < 0 {
			w.LastTransitionTime = now
			status.Conditions = append(status.Conditions, w)
			changed = true
			continue
		}
		old := &status.Conditions[i]
		if old.Status == w.Status && old.Reason == w.Reason && old.Message == w.Message {
			continue
		}
		if old.Status != w.Status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	return changed
}
