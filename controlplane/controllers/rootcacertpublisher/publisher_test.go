package rootcacertpublisher

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

// published checks that namespace ns holds the ConfigMap with exactly the bundle and the description.
func published(ctx context.Context, client *fake.Clientset, ns string) error {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(cm.Data) != 1 || cm.Data[DataKey] != testCA {
		return fmt.Errorf("data = %v, want only %s", cm.Data, DataKey)
	}
	if got := cm.Annotations[DescriptionAnnotation]; got != Description {
		return fmt.Errorf("annotation %s = %q", DescriptionAnnotation, got)
	}
	return nil
}

func TestPublishedRestoredAndNotInTerminatingNamespaces(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &now}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
		// A stale copy from an earlier CA, with an extra key and no description: rewritten on start.
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stale"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "stale"}, Data: map[string]string{DataKey: "old", "extra": "x"}},
		// Another ConfigMap is left alone.
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"}, Data: map[string]string{"k": "v"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := New(client, factory, []byte(testCA), 0, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { p.Run(ctx, 2) })
	wait := func(ns, what string) {
		t.Helper()
		controllertest.Eventually(t, what, func() error { return published(ctx, client, ns) })
	}
	wait("team", "published in an existing namespace")
	wait("stale", "stale copy rewritten")

	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("new", "published in a new namespace")

	if err := client.CoreV1().ConfigMaps("team").Delete(ctx, ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("team", "recreated after delete")

	cm, err := client.CoreV1().ConfigMaps("new").Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[DataKey] = "tampered"
	delete(cm.Annotations, DescriptionAnnotation)
	if _, err := client.CoreV1().ConfigMaps("new").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("new", "restored after edit")

	if _, err := client.CoreV1().ConfigMaps("leaving").Get(ctx, ConfigMapName, metav1.GetOptions{}); err == nil {
		t.Fatal("configmap created in a terminating namespace")
	}
	app, err := client.CoreV1().ConfigMaps("team").Get(ctx, "app", metav1.GetOptions{})
	if err != nil || app.Data["k"] != "v" || len(app.Annotations) != 0 {
		t.Fatalf("unrelated configmap changed: %+v, %v", app, err)
	}
}

func TestNewNeedsRootCA(t *testing.T) {
	client := fake.NewClientset()
	if _, err := New(client, informers.NewSharedInformerFactory(client, 0), nil, 0, controllertest.Logger()); err == nil {
		t.Fatal("New accepted an empty root CA")
	}
}
