package resourcequota

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func cpuPod(name, cpu string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", cpu)}}}},
		Status: v1.PodStatus{Phase: phase}}
}

// TestControllerCountsAndReplenishes: the controller fills status.hard and status.used (a Succeeded
// pod uses no cpu, another namespace's ConfigMap is not counted), recounts when a pod is deleted or
// turns Failed, and when spec.hard gains a resource.
func TestControllerCountsAndReplenishes(t *testing.T) {
	objs := []runtime.Object{
		&v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
			Spec: v1.ResourceQuotaSpec{Hard: rl("pods", "5", "requests.cpu", "2", "configmaps", "3", "persistentvolumeclaims", "1")}},
		cpuPod("a", "300m", v1.PodRunning), cpuPod("b", "500m", v1.PodPending), cpuPod("done", "1", v1.PodSucceeded),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: "other"}},
	}
	client := fake.NewClientset(objs...)
	controllertest.StatusSubresource(client, "resourcequotas")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, nil, time.Hour, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	usedIs := func(want v1.ResourceList) func() error {
		return func() error {
			q, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !quotav1.Equals(q.Status.Hard, q.Spec.Hard) {
				return fmt.Errorf("status.hard %v, spec.hard %v", q.Status.Hard, q.Spec.Hard)
			}
			if !quotav1.Equals(q.Status.Used, want) {
				return fmt.Errorf("status.used %v, want %v", q.Status.Used, want)
			}
			return nil
		}
	}
	controllertest.Eventually(t, "initial usage", usedIs(rl("pods", "2", "requests.cpu", "800m", "configmaps", "1", "persistentvolumeclaims", "0")))

	if err := client.CoreV1().Pods("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "usage after a deletion", usedIs(rl("pods", "1", "requests.cpu", "500m", "configmaps", "1", "persistentvolumeclaims", "0")))

	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, cpuPod("b", "500m", v1.PodFailed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "usage after a pod failed", usedIs(rl("pods", "0", "requests.cpu", "0", "configmaps", "1", "persistentvolumeclaims", "0")))

	controllertest.Modify(t, func() (*v1.ResourceQuota, error) {
		return client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
	},
		func(q *v1.ResourceQuota) { q.Spec.Hard = rl("pods", "5", "secrets", "2", "count/pods", "9") },
		func(q *v1.ResourceQuota) error {
			_, err := client.CoreV1().ResourceQuotas("ns").Update(ctx, q, metav1.UpdateOptions{})
			return err
		})
	controllertest.Eventually(t, "usage after a spec change", usedIs(rl("pods", "0", "secrets", "0", "count/pods", "2")))
}

func TestCountedResource(t *testing.T) {
	for name, want := range map[v1.ResourceName]string{
		"count/deployments.apps": "deployments.apps", "count/widgets.stable.example.com": "widgets.stable.example.com",
		"count/pods": "pods", "pods": "", "count/": "",
	} {
		gr, ok := countedResource(name)
		if got := gr.String(); ok != (want != "") || ok && got != want {
			t.Errorf("countedResource(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
