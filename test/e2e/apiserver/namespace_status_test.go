package apiserver_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestNamespaceStatusKeepsMetadata: namespaces/status takes a patch's or update's metadata and status and
// ignores its spec, as Kubernetes' namespace status strategy does (upstream's "apply changes to a
// namespace status" conformance spec patches an annotation and a condition in one merge patch); a phase
// that does not match deletionTimestamp is refused, and a Terminating namespace is not removed by a
// status or metadata write while spec.finalizers is not empty.
func TestNamespaceStatusKeepsMetadata(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	nss := s.Client.CoreV1().Namespaces()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "st"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	patch := `{"metadata":{"annotations":{"patched":"yes"}},"spec":{"finalizers":["example.com/x"]},` +
		`"status":{"conditions":[{"type":"StatusPatch","status":"True","reason":"E2E","message":"patched"}]}}`
	got, err := nss.Patch(ctx, "st", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["patched"] != "yes" {
		t.Fatalf("status patch dropped the annotation: %v", got.Annotations)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "StatusPatch" || got.Status.Conditions[0].Message != "patched" {
		t.Fatalf("status patch conditions %+v", got.Status.Conditions)
	}
	if !slices.Equal(got.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
		t.Fatalf("status patch changed spec.finalizers to %v", got.Spec.Finalizers)
	}

	got.Labels = map[string]string{"updated": "yes"}
	got.Spec.Finalizers = nil
	got.Status.Conditions[0].Message = "updated"
	upd, err := nss.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Labels["updated"] != "yes" || upd.Annotations["patched"] != "yes" || upd.Status.Conditions[0].Message != "updated" {
		t.Fatalf("status update: labels %v annotations %v conditions %+v", upd.Labels, upd.Annotations, upd.Status.Conditions)
	}
	if len(upd.Spec.Finalizers) != 1 {
		t.Fatalf("status update changed spec.finalizers to %v", upd.Spec.Finalizers)
	}
	stored, err := nss.Get(ctx, "st", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Labels["updated"] != "yes" || stored.Annotations["patched"] != "yes" {
		t.Fatalf("stored namespace: labels %v annotations %v", stored.Labels, stored.Annotations)
	}

	_, err = nss.Patch(ctx, "st", types.MergePatchType, []byte(`{"status":{"phase":"Terminating"}}`), metav1.PatchOptions{}, "status")
	if !apierrors.IsInvalid(err) {
		t.Fatalf("phase Terminating without deletionTimestamp: got %v, want Invalid", err)
	}

	// a Terminating namespace (spec.finalizers not yet removed) survives status and metadata writes
	if err := nss.Delete(ctx, "st", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Patch(ctx, "st", types.MergePatchType, []byte(`{"status":{"conditions":[{"type":"NamespaceContentRemaining","status":"True"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Patch(ctx, "st", types.MergePatchType, []byte(`{"metadata":{"labels":{"after":"delete"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	term, err := nss.Get(ctx, "st", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("terminating namespace removed by an update: %v", err)
	}
	if term.Status.Phase != corev1.NamespaceTerminating || term.Labels["after"] != "delete" || len(term.Status.Conditions) != 1 {
		t.Fatalf("terminating namespace: phase %s labels %v conditions %+v", term.Status.Phase, term.Labels, term.Status.Conditions)
	}
}
