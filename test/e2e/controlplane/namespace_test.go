package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestNamespaceDeletionPodsFirst is upstream's OrderedNamespaceDeletion conformance spec against the
// API server and controllers: a namespace whose pod is held by a finalizer stays Terminating with its
// deletion conditions set (NamespaceDeletionContentFailure among them, NamespaceFinalizersRemaining
// naming the finalizer), the pod is being deleted while its configmap is kept, and once the finalizer is
// removed the namespace goes away.
func TestNamespaceDeletionPodsFirst(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns, finalizer = "ordered", "e2e.example.com/finalizer"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{finalizer}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "deletion conditions", func() error {
		got, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := map[v1.NamespaceConditionType]string{
			v1.NamespaceDeletionContentFailure: "ContentDeleted",
			v1.NamespaceFinalizersRemaining:    "SomeFinalizersRemain",
			v1.NamespaceContentRemaining:       "SomeResourcesRemain",
		}
		for _, cond := range got.Status.Conditions {
			if want[cond.Type] == cond.Reason {
				delete(want, cond.Type)
			}
		}
		if got.Status.Phase != v1.NamespaceTerminating || len(want) > 0 {
			return fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("held pod: %v, deletionTimestamp %v", err, p.GetDeletionTimestamp())
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cfg", metav1.GetOptions{}); err != nil {
		t.Fatalf("configmap deleted before the pod: %v", err)
	}

	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "namespace removed", func() error {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v", err)
		}
		return nil
	})
}
