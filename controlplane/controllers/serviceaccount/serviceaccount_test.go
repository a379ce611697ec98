package serviceaccount

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDefaultServiceAccountCreatedAndRecreated(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &now}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go c.Run(ctx, 1)
	wait := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := client.CoreV1().ServiceAccounts("team").Get(ctx, DefaultName, metav1.GetOptions{}); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("default service account not created")
			}
			time.Sleep(20 * time.Millisecond)
		}
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
