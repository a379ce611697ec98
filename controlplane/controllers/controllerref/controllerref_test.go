package controllerref

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestClaim: a matching orphan is adopted (controller reference and finalizer), an owned pod that
// stopped matching is released (both removed, other owners kept), an owned matching pod is kept, and
// pods being deleted or owned by another controller are left alone; a failing CanAdopt stops the
// adoptions but not the releases.
func TestClaim(t *testing.T) {
	owner := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"}}
	kind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	ours := *metav1.NewControllerRef(owner, kind)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm-uid"}
	theirs := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid", Controller: ptr.To(true)}
	now := metav1.Now()
	pod := func(name string, lbl map[string]string, refs ...metav1.OwnerReference) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: lbl, OwnerReferences: refs}}
	}
	match, nomatch := map[string]string{"app": "web"}, map[string]string{"app": "other"}
	orphan := pod("orphan", match)
	owned := pod("owned", match, ours)
	stray := pod("stray", nomatch, ours, other)
	stray.Finalizers = []string{"keep.example.com", "test/claim"}
	foreign := pod("foreign", match, theirs)
	dying := pod("dying", match)
	dying.DeletionTimestamp, dying.Finalizers = &now, []string{"x"}

	for _, tc := range []struct {
		name     string
		canAdopt error
		want     []string
	}{{"adopt", nil, []string{"orphan", "owned"}}, {"adoption refused", errors.New("owner being deleted"), []string{"owned"}}} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*v1.Pod{orphan, owned, stray, foreign, dying}
			objs := make([]*v1.Pod, len(pods))
			client := fake.NewClientset()
			for i, p := range pods {
				objs[i] = p.DeepCopy()
				if err := client.Tracker().Add(objs[i]); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			m := &Manager{Owner: owner, Kind: kind, Selector: labels.SelectorFromSet(match), Finalizers: []string{"test/claim"},
				Patch: func(ctx context.Context, name string, patch []byte) error {
					_, err := client.CoreV1().Pods("ns").Patch(ctx, name, PatchType, patch, metav1.PatchOptions{})
					return err
				},
				CanAdopt: func(context.Context) error { return tc.canAdopt }}
			got, err := Claim(ctx, m, objs)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("claimed %v, want %v", names, tc.want)
			}
			read := func(name string) *v1.Pod {
				p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			o := read("orphan")
			adopted := metav1.IsControlledBy(o, owner) && slices.Equal(o.Finalizers, []string{"test/claim"})
			if adopted != (tc.canAdopt == nil) || (!adopted && (len(o.OwnerReferences) != 0 || len(o.Finalizers) != 0)) {
				t.Errorf("orphan owners %v finalizers %v", o.OwnerReferences, o.Finalizers)
			}
			if s := read("stray"); !reflect.DeepEqual(s.OwnerReferences, []metav1.OwnerReference{other}) || !slices.Equal(s.Finalizers, []string{"keep.example.com"}) {
				t.Errorf("released pod owners %v finalizers %v, want only the ConfigMap and keep.example.com", s.OwnerReferences, s.Finalizers)
			}
			if f := read("foreign"); !reflect.DeepEqual(f.OwnerReferences, []metav1.OwnerReference{theirs}) {
				t.Errorf("foreign pod owners %v", f.OwnerReferences)
			}
			if d := read("dying"); len(d.OwnerReferences) != 0 {
				t.Errorf("pod being deleted adopted: %v", d.OwnerReferences)
			}
		})
	}
}
