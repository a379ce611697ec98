package history

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func owner(image string) (*appsv1.StatefulSet, Owner) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid"},
		Spec: appsv1.StatefulSetSpec{Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}}}}}
	return set, Owner{Object: set, Kind: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), Template: &set.Spec.Template,
		SetCollisionCount: func(context.Context, int32) error { return nil }}
}

// TestEnsureAndCleanup: a new template gets revision max+1 named <owner>-<hash> with the hash label and
// a template patch that decodes back; going back to an older template renumbers its revision; Cleanup
// keeps limit old revisions plus the live ones and those a pod runs.
func TestEnsureAndCleanup(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	var revs []*appsv1.ControllerRevision
	ensure := func(image string) *appsv1.ControllerRevision {
		t.Helper()
		_, o := owner(image)
		r, err := Ensure(ctx, client, o, revs)
		if err != nil {
			t.Fatal(err)
		}
		for i, old := range revs {
			if old.Name == r.Name {
				revs[i] = r
				return r
			}
		}
		revs = append(revs, r)
		return r
	}
	r1 := ensure("v1")
	tmpl, err := Template(r1)
	if err != nil || tmpl.Spec.Containers[0].Image != "v1" || r1.Revision != 1 || r1.Labels[HashLabel] == "" ||
		r1.Name != "web-"+r1.Labels[HashLabel] || r1.Labels["app"] != "web" || r1.OwnerReferences[0].UID != "uid" {
		t.Fatalf("first revision %+v (template %v, %v)", r1.ObjectMeta, tmpl, err)
	}
	r2, r3 := ensure("v2"), ensure("v3")
	if r2.Revision != 2 || r3.Revision != 3 {
		t.Fatalf("revisions %d %d", r2.Revision, r3.Revision)
	}
	if back := ensure("v1"); back.Name != r1.Name || back.Revision != 4 {
		t.Fatalf("rollback to v1: %s revision %d, want %s revision 4", back.Name, back.Revision, r1.Name)
	}
	// r3 is live, a pod runs r2 (by revision name, as StatefulSet pods carry it): with limit 0 only r1 goes.
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{HashLabel: r2.Name}}}
	if err := Cleanup(ctx, client, ptr.To[int32](0), revs, []*v1.Pod{pod}, r3); err != nil {
		t.Fatal(err)
	}
	left, err := client.AppsV1().ControllerRevisions("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range left.Items {
		names = append(names, r.Name)
	}
	if len(names) != 2 || !slices.Contains(names, r2.Name) || !slices.Contains(names, r3.Name) {
		t.Fatalf("after cleanup %v, want %s and %s", names, r2.Name, r3.Name)
	}
}
