package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestStorageVersionMigration: a StorageVersionMigration of configmaps makes the controller rewrite the
// ConfigMap whose stored bytes are not in the API server's current encoding (here re-indented JSON put
// straight into etcd) and leaves the ones already current untouched (same etcd revision), then reports
// Running=False and Succeeded=True with the checkpoint resourceVersion; one of a resource discovery does not
// know waits (Running, no checkpoint); a custom resource whose storage version moved is rewritten in the new
// version and its definition's storedVersions trimmed to it; the spec is immutable, a missing resource is refused, and a
// Succeeded condition cannot be turned back.
func TestStorageVersionMigration(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	ns := "svm"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	etcd := c.Etcd(t)
	key := func(name string) string { return "/registry/configmaps/" + ns + "/" + name }
	get := func(name string) (value []byte, rev int64) {
		r, err := etcd.Get(ctx, key(name))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("etcd %s: %v %v", key(name), err, r)
		}
		return r.Kvs[0].Value, r.Kvs[0].ModRevision
	}
	// cm-0 as an older writer could have stored it: the same object, not in the current encoding.
	cur, _ := get("cm-0")
	var indented bytes.Buffer
	if err := json.Indent(&indented, cur, "", "  "); err != nil {
		t.Fatalf("stored configmap is not JSON: %v (%q)", err, cur)
	}
	if _, err := etcd.Put(ctx, key("cm-0"), indented.String()); err != nil {
		t.Fatal(err)
	}
	_, rev0 := get("cm-0")
	_, rev1 := get("cm-1")

	svms := c.Client.StoragemigrationV1().StorageVersionMigrations()
	m, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "configmaps"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "configmaps migration Succeeded", func() error {
		m, err = svms.Get(ctx, "configmaps", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) {
			return fmt.Errorf("conditions %+v", m.Status.Conditions)
		}
		return nil
	})
	if meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationRunning)) || m.Status.ResourceVersion == "" {
		t.Errorf("finished migration: Running still true or no checkpoint: %+v", m.Status)
	}
	after0, newRev0 := get("cm-0")
	if newRev0 == rev0 || bytes.Contains(after0, []byte("\n  ")) {
		t.Errorf("cm-0 not rewritten in the current encoding: revision %d → %d, %q", rev0, newRev0, after0)
	}
	if _, r := get("cm-1"); r != rev1 {
		t.Errorf("cm-1 was already current, but was written again: revision %d → %d", rev1, r)
	}
	if got, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm-0", metav1.GetOptions{}); err != nil || got.Data["k"] != "v" {
		t.Errorf("cm-0 after migration: %v %+v", err, got)
	}

	// A custom resource whose storage version moved from v1 to v2: the migration rewrites its objects in
	// v2 and trims the definition's storedVersions to [v2].
	crds := apiextensionsclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: new(true)}}}}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.svm.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "svm.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v2", Served: true, Storage: false, Schema: schema}}}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widgets := dynamic.NewForConfigOrDie(c.Config).Resource(k8sschema.GroupVersionResource{Group: "svm.example.com", Version: "v1", Resource: "widgets"}).Namespace(ns)
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "svm.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(3)}}}
	eventually(t, 30*time.Second, "a Widget created (the CRD served)", func() error {
		_, err := widgets.Create(ctx, widget, metav1.CreateOptions{})
		return err
	})
	eventually(t, 30*time.Second, "storage version v2", func() error {
		crd, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	eventually(t, 30*time.Second, "storedVersions [v1 v2]", func() error {
		crd, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || fmt.Sprint(crd.Status.StoredVersions) != "[v1 v2]" {
			return fmt.Errorf("%v %v", err, crd.Status.StoredVersions)
		}
		return nil
	})
	if _, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "svm.example.com", Resource: "widgets"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "widgets migrated and storedVersions [v2]", func() error {
		m, err := svms.Get(ctx, "widgets", metav1.GetOptions{})
		if err != nil || !meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) {
			return fmt.Errorf("migration: %v %+v", err, m.Status.Conditions)
		}
		crd, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || fmt.Sprint(crd.Status.StoredVersions) != "[v2]" {
			return fmt.Errorf("storedVersions: %v %v", err, crd.Status.StoredVersions)
		}
		return nil
	})
	r, err := etcd.Get(ctx, "/registry/svm.example.com/widgets/"+ns+"/w")
	if err != nil || len(r.Kvs) != 1 || !bytes.Contains(r.Kvs[0].Value, []byte(`"apiVersion":"svm.example.com/v2"`)) {
		t.Errorf("the Widget in etcd after migration: %v %q", err, r.Kvs)
	}

	// A resource discovery does not know: the migration runs (and fails after a minute, as upstream's).
	if _, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "unknown"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "example.com", Resource: "foos"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "unknown resource's migration Running", func() error {
		u, err := svms.Get(ctx, "unknown", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(u.Status.Conditions, string(svmv1.MigrationRunning)) || u.Status.ResourceVersion != "" {
			return fmt.Errorf("status %+v", u.Status)
		}
		return nil
	})

	// Validation, as kube-apiserver's.
	refused := func(what string, err error, want string) {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want 422 with %q", what, err, want)
		}
	}
	m.Spec.Resource.Resource = "secrets"
	_, err = svms.Update(ctx, m, metav1.UpdateOptions{})
	refused("spec change", err, "spec: Invalid value")
	_, err = svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{})
	refused("no resource", err, "spec.resource.resource: Required value")
	if m, err = svms.Get(ctx, "configmaps", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationSucceeded), Status: metav1.ConditionFalse, Reason: "Undo"})
	_, err = svms.UpdateStatus(ctx, m, metav1.UpdateOptions{})
	refused("undo Succeeded", err, "Success condition cannot be set to false once it is true")
}
