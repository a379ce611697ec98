package apiserver_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestImmutableConfigMapsAndSecrets: a ConfigMap or Secret with immutable=true keeps its data (and
// binaryData) and its immutable flag, as kube-apiserver's update validation says (422 naming the
// field, "field is immutable when `immutable` is set"); its metadata still changes, it can still be
// deleted, and a Secret's type never changes. A mutable one changes freely and can be made immutable.
func TestImmutableConfigMapsAndSecrets(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	yes := true
	wantInvalid := func(t *testing.T, what string, err error, field string) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "field is immutable") {
			t.Errorf("%s: err = %v, want 422 naming %s as immutable", what, err, field)
		}
	}

	cms := s.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["a"], cm.Immutable = "2", &yes // a mutable ConfigMap changes and becomes immutable
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update of a mutable ConfigMap: %v", err)
	}
	changed := cm.DeepCopy()
	changed.Data["a"] = "3"
	_, err = cms.Update(ctx, changed, metav1.UpdateOptions{})
	wantInvalid(t, "data change of an immutable ConfigMap", err, "data")
	changed = cm.DeepCopy()
	changed.BinaryData = map[string][]byte{"b": []byte("x")}
	_, err = cms.Update(ctx, changed, metav1.UpdateOptions{})
	wantInvalid(t, "binaryData change of an immutable ConfigMap", err, "binaryData")
	changed = cm.DeepCopy()
	changed.Immutable = nil
	_, err = cms.Update(ctx, changed, metav1.UpdateOptions{})
	wantInvalid(t, "unsetting immutable", err, "immutable")
	cm.Labels = map[string]string{"k": "v"}
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("metadata change of an immutable ConfigMap: %v", err)
	}
	got, err := cms.Get(ctx, "cm", metav1.GetOptions{})
	if err != nil || got.Data["a"] != "2" || len(got.BinaryData) != 0 || got.Immutable == nil || !*got.Immutable {
		t.Errorf("stored ConfigMap = %+v, %v; want data a=2, immutable", got, err)
	}
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete of an immutable ConfigMap: %v", err)
	}

	secrets := s.Client.CoreV1().Secrets("default")
	sec, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Type: corev1.SecretTypeOpaque,
		StringData: map[string]string{"a": "1"}, Immutable: &yes}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changedSec := sec.DeepCopy()
	changedSec.StringData = map[string]string{"a": "2"} // stringData merges into data: refused too
	_, err = secrets.Update(ctx, changedSec, metav1.UpdateOptions{})
	wantInvalid(t, "stringData change of an immutable Secret", err, "data")
	changedSec = sec.DeepCopy()
	changedSec.Immutable = nil
	_, err = secrets.Update(ctx, changedSec, metav1.UpdateOptions{})
	wantInvalid(t, "unsetting a Secret's immutable", err, "immutable")
	changedSec = sec.DeepCopy()
	changedSec.Type = "example.com/other"
	_, err = secrets.Update(ctx, changedSec, metav1.UpdateOptions{})
	wantInvalid(t, "type change of a Secret", err, "type")
	sec.Annotations = map[string]string{"note": "x"}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Errorf("metadata change of an immutable Secret: %v", err)
	}
	if got, err := secrets.Get(ctx, "sec", metav1.GetOptions{}); err != nil || string(got.Data["a"]) != "1" {
		t.Errorf("stored Secret data = %v, %v; want a=1", got.Data, err)
	}
}
