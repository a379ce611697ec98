package serviceaccount

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func TestDefaultServiceAccountCreatedAndRecreated(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &now}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	wait := func() {
		t.Helper()
		controllertest.Eventually(t, "default service account", func() error {
			_, err := client.CoreV1().ServiceAccounts("team").Get(ctx, DefaultName, metav1.GetOptions{})
			return err
		})
	}
	wait()
	if err := client.CoreV1().ServiceAccounts("team").Delete(ctx, DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait()
	if _, err := client.CoreV1().ServiceAccounts("leaving").Get(ctx, DefaultName, metav1.GetOptions{}); err == nil {
		t.Fatal("service account created in a terminating namespace")
	}
}
