package apiserver_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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

// TestStatusSubresourceMetadata: what metadata a /status write may change follows each resource's upstream
// status strategy (the conformance specs "should support CronJob API operations" and the other
// "/status" API-operation specs patch an annotation together with the status): the classic resources keep
// the request's labels and annotations, Deployments keep their stored labels, pods keep their stored owner
// references, and the newer APIs (ValidatingAdmissionPolicy, flowcontrol) keep all stored metadata.
func TestStatusSubresourceMetadata(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	const ns = "default"
	patch := []byte(`{"metadata":{"labels":{"patched":"label"},"annotations":{"patched":"annotation"}},"status":{}}`)
	one := int32(1)
	podTemplate := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "st"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/img:1"}}, RestartPolicy: corev1.RestartPolicyOnFailure}}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "0d3c2f9e-1111-4a4a-9b9b-000000000001"}}

	cj, err := s.Client.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "st"},
		Spec: batchv1.CronJobSpec{Schedule: "*/1 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.BatchV1().CronJobs(ns).Patch(ctx, cj.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["patched"] != "label" || got.Annotations["patched"] != "annotation" {
		t.Errorf("cronjobs/status: labels %v annotations %v, want both patched", got.Labels, got.Annotations)
	}

	dep, err := s.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "st", Labels: map[string]string{"orig": "x"}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "st"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: podTemplate.ObjectMeta, Spec: corev1.PodSpec{Containers: podTemplate.Spec.Containers}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotDep, err := s.Client.AppsV1().Deployments(ns).Patch(ctx, dep.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gotDep.Labels["patched"]; ok || gotDep.Labels["orig"] != "x" || gotDep.Annotations["patched"] != "annotation" {
		t.Errorf("deployments/status: labels %v annotations %v, want stored labels and the patched annotation", gotDep.Labels, gotDep.Annotations)
	}

	pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "st", OwnerReferences: owner}, Spec: podTemplate.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podPatch := []byte(`{"metadata":{"annotations":{"patched":"annotation"},"ownerReferences":null},"status":{"message":"m"}}`)
	gotPod, err := s.Client.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, podPatch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(gotPod.OwnerReferences) != 1 || gotPod.Annotations["patched"] != "annotation" || gotPod.Status.Message != "m" {
		t.Errorf("pods/status: ownerReferences %v annotations %v message %q, want stored owners, the patched annotation and message",
			gotPod.OwnerReferences, gotPod.Annotations, gotPod.Status.Message)
	}

	fs, err := s.Client.FlowcontrolV1().FlowSchemas().Get(ctx, "exempt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotFS, err := s.Client.FlowcontrolV1().FlowSchemas().Patch(ctx, fs.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gotFS.Annotations["patched"]; ok {
		t.Errorf("flowschemas/status: annotations %v, want the stored metadata", gotFS.Annotations)
	}
	if _, ok := gotFS.Labels["patched"]; ok {
		t.Errorf("flowschemas/status: labels %v, want the stored metadata", gotFS.Labels)
	}
}
