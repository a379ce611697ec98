package statefulset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimName is upstream's getPersistentVolumeClaimName: <template>-<set>-<ordinal>.
func claimName(set *appsv1.StatefulSet, template string, ord int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ord)
}

// addClaimVolumes points pod's volume of each volumeClaimTemplate (added, or replacing a template
// volume of the same name) at the ordinal's claim, as upstream's updateStorage.
func addClaimVolumes(set *appsv1.StatefulSet, pod *v1.Pod, ord int) {
	for _, t := range set.Spec.VolumeClaimTemplates {
		vol := v1.Volume{Name: t.Name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			ClaimName: claimName(set, t.Name, ord)}}}
		if i := slices.IndexFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == t.Name }); i >= 0 {
			pod.Spec.Volumes[i] = vol
		} else {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
}

// newClaim is the claim of template for ordinal ord: the template's spec, the set's selector labels
// (upstream), and the owner references the retention policy asks for.
func newClaim(set *appsv1.StatefulSet, t *v1.PersistentVolumeClaim, ord int) *v1.PersistentVolumeClaim {
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName(set, t.Name, ord), Namespace: set.Namespace,
		Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations)}, Spec: *t.Spec.DeepCopy()}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	if set.Spec.Selector != nil {
		maps.Copy(claim.Labels, set.Spec.Selector.MatchLabels)
	}
	claim.OwnerReferences = claimOwners(set, nil, ord, nil)
	return claim
}

// claimOwners returns refs with the set's and the pod's references set as the retention policy says
// (upstream's updateClaimOwnerRefForSetAndPod): whenDeleted=Delete makes the set an owner of the claims
// of ordinals in range; whenScaled=Delete makes a condemned pod (ordinal out of range) the only owner
// of its claims, so the garbage collector deletes them once the pod is gone. Other owners are kept.
func claimOwners(set *appsv1.StatefulSet, pod *v1.Pod, ord int, refs []metav1.OwnerReference) []metav1.OwnerReference {
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	whenDeleted, whenScaled := appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if p != nil {
		whenDeleted, whenScaled = p.WhenDeleted, p.WhenScaled
	}
	start := startOrdinal(set)
	condemned := ord < start || ord >= start+replicasOf(set)
	setOwner := whenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType && !(condemned && whenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType)
	podOwner := pod != nil && condemned && whenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return r.UID == set.UID || (r.Kind == "Pod" && r.APIVersion == "v1")
	})
	if setOwner {
		out = append(out, metav1.OwnerReference{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind, Name: set.Name, UID: set.UID})
	}
	if podOwner {
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
	}
	return out
}

// createClaims creates the missing claims of pod (ordinal ord) before the pod itself, as upstream's
// createPersistentVolumeClaims; a claim being deleted blocks the pod (its data is going).
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, ord int) error {
	var errs []error
	for i := range set.Spec.VolumeClaimTemplates {
		want := newClaim(set, &set.Spec.VolumeClaimTemplates[i], ord)
		have, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		switch {
		case err == nil && have.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("claim %s/%s is being deleted", set.Namespace, want.Name))
		case err == nil:
		case apierrors.IsNotFound(err):
			_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, want, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				c.recorder.Eventf(set, v1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s-%d in StatefulSet %s failed error: %v", want.Name, set.Name, ord, set.Name, err)
				errs = append(errs, err)
				continue
			}
			c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulCreate", "create Claim %s for Pod %s-%d in StatefulSet %s success", want.Name, set.Name, ord, set.Name)
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncClaimOwners brings the owner references of the claims of pods (the set's pods) to the
// retention policy, condemned pods' before they are deleted.
func (c *Controller) syncClaimOwners(ctx context.Context, set *appsv1.StatefulSet, pods []*v1.Pod) error {
	var errs []error
	for _, pod := range pods {
		ord := ordinalOf(set, pod)
		for _, t := range set.Spec.VolumeClaimTemplates {
			claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(claimName(set, t.Name, ord))
			if err != nil {
				continue // not created yet, or deleted: nothing to own
			}
			want := claimOwners(set, pod, ord, claim.OwnerReferences)
			if slices.EqualFunc(want, claim.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID }) {
				continue
			}
			upd := claim.DeepCopy()
			upd.OwnerReferences = want
			if _, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("claim %s/%s owners: %w", set.Namespace, claim.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
