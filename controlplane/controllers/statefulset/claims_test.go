package statefulset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestClaimOwners: the retention policy decides the claims' owners — none for Retain/Retain, the set
// for whenDeleted=Delete, a condemned pod alone for whenScaled=Delete; other owners are kept.
func TestClaimOwners(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", UID: "set-uid"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
	pod := func(ord string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-" + ord, UID: types.UID("pod-db-" + ord)}}
	}
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Backup", Name: "b", UID: "other"}
	uids := func(refs []metav1.OwnerReference) (out []string) {
		for _, r := range refs {
			out = append(out, string(r.UID))
		}
		return out
	}
	for _, c := range []struct {
		deleted, scaled appsv1.PersistentVolumeClaimRetentionPolicyType
		ord             int
		want            []string
	}{
		{"Retain", "Retain", 1, []string{"other"}},
		{"Retain", "Retain", 2, []string{"other"}},
		{"Delete", "Retain", 1, []string{"other", "set-uid"}},
		{"Delete", "Retain", 2, []string{"other", "set-uid"}},
		{"Retain", "Delete", 1, []string{"other"}},
		{"Retain", "Delete", 2, []string{"other", "pod-db-2"}},
		{"Delete", "Delete", 2, []string{"other", "pod-db-2"}},
		{"Delete", "Delete", 0, []string{"other", "set-uid"}},
	} {
		set.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: c.deleted, WhenScaled: c.scaled}
		p := pod(string(rune('0' + c.ord)))
		got := uids(claimOwners(set, p, c.ord, []metav1.OwnerReference{other, {APIVersion: "v1", Kind: "Pod", Name: "db-9", UID: "stale"}}))
		if len(got) != len(c.want) || (len(got) > 1 && got[1] != c.want[1]) || got[0] != c.want[0] {
			t.Errorf("%s/%s ordinal %d: owners %v, want %v", c.deleted, c.scaled, c.ord, got, c.want)
		}
	}
	tmpl := v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}}
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	set.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{tmpl}
	if cl := newClaim(set, &tmpl, 1); cl.Name != "data-db-1" || cl.Labels["app"] != "db" {
		t.Errorf("claim %s labels %v", cl.Name, cl.Labels)
	}
	p := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}}}
	addClaimVolumes(set, p, 3)
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim == nil || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-3" {
		t.Errorf("pod volumes %+v", p.Spec.Volumes)
	}
}
