package apiserver_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestPodTemplates serves core/v1 podtemplates as kube-apiserver does: the template's pod spec is
// defaulted (restartPolicy, dnsPolicy, grace period, pull policy) and validated (422 naming
// template.spec.containers and template.metadata.labels), generation is 1 at create and grows only when
// the template changes, and list, label-selected list and deletecollection work.
func TestPodTemplates(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, pts := ctxT(t), s.Client.CoreV1().PodTemplates("default")
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25"}}}}}
	created, err := pts.Create(ctx, pt, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := created.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyAlways || spec.DNSPolicy != corev1.DNSClusterFirst ||
		spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 30 ||
		spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("template spec not defaulted: restartPolicy %q dnsPolicy %q grace %v pullPolicy %q", spec.RestartPolicy,
			spec.DNSPolicy, spec.TerminationGracePeriodSeconds, spec.Containers[0].ImagePullPolicy)
	}
	if created.Generation != 1 {
		t.Errorf("generation at create = %d, want 1", created.Generation)
	}

	// a metadata-only change keeps the generation; a template change bumps it
	created.Annotations = map[string]string{"note": "x"}
	upd, err := pts.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil || upd.Generation != 1 {
		t.Fatalf("metadata update: generation %d, err %v (want 1)", upd.GetGeneration(), err)
	}
	upd.Template.Spec.Containers[0].Image = "nginx:1.26"
	upd, err = pts.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || upd.Generation != 2 || upd.Template.Spec.Containers[0].Image != "nginx:1.26" {
		t.Fatalf("template update: generation %d image %q, err %v (want 2, nginx:1.26)", upd.GetGeneration(),
			upd.Template.Spec.Containers[0].Image, err)
	}

	for _, bad := range []struct {
		name, field string
		mutate      func(*corev1.PodTemplate)
	}{
		{"no-containers", "template.spec.containers", func(p *corev1.PodTemplate) { p.Template.Spec.Containers = nil }},
		{"bad-label", "template.metadata.labels", func(p *corev1.PodTemplate) { p.Template.Labels = map[string]string{"a b": "c"} }},
		{"no-image", "template.spec.containers[0].image", func(p *corev1.PodTemplate) { p.Template.Spec.Containers[0].Image = "" }},
	} {
		b := pt.DeepCopy()
		b.Name = bad.name
		bad.mutate(b)
		_, err := pts.Create(ctx, b, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("create %s: %v, want 422 naming %s", bad.name, err, bad.field)
		}
		if _, err := pts.Get(ctx, bad.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("invalid podtemplate %s stored: %v", bad.name, err)
		}
	}
	// an update is validated too
	upd.Template.Spec.Containers = nil
	if _, err := pts.Update(ctx, upd, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("update without containers: %v, want 422", err)
	}

	other := pt.DeepCopy()
	other.Name, other.Labels = "batch", map[string]string{"tier": "back"}
	if _, err := pts.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	front, err := pts.List(ctx, metav1.ListOptions{LabelSelector: "tier=front"})
	if err != nil || len(front.Items) != 1 || front.Items[0].Name != "web" {
		t.Fatalf("list tier=front: %v %v", err, front)
	}
	if err := pts.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if all, err := pts.List(ctx, metav1.ListOptions{}); err != nil || len(all.Items) != 0 {
		t.Fatalf("after deletecollection: %v, %d left", err, len(all.Items))
	}
}
