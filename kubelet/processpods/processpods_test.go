package processpods

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/internal/components"
)

func TestSyncPublishesRecords(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "components")
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}}}
	client := fake.NewClientset(node)
	if _, err := components.Started(dir, components.APIServer, os.Getpid(), time.Now(), []string{"nodekit", "server"}, "/var/lib/nodekit/logs/kube-apiserver.log"); err != nil {
		t.Fatal(err)
	}
	if _, err := components.Started(dir, components.Scheduler, 1<<30, time.Now(), []string{"nodekit", "server", "--run-component=kube-scheduler"}, ""); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Dir: dir, NodeName: "n1", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	api, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "kube-apiserver-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if api.Annotations[v1.MirrorPodAnnotationKey] == "" || api.Labels["component"] != components.APIServer || api.Labels["tier"] != "control-plane" ||
		api.Spec.NodeName != "n1" || api.OwnerReferences[0].UID != "node-uid" || !api.Spec.HostNetwork {
		t.Errorf("mirror pod: %+v", api.ObjectMeta)
	}
	cs := api.Status.ContainerStatuses[0]
	if api.Status.Phase != v1.PodRunning || !cs.Ready || cs.State.Running == nil || api.Status.PodIP != "10.0.0.5" {
		t.Errorf("status of a live process: %+v", api.Status)
	}
	sched, _ := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "kube-scheduler-n1", metav1.GetOptions{})
	if cs := sched.Status.ContainerStatuses[0]; cs.Ready || cs.State.Waiting == nil {
		t.Errorf("status of a dead process: %+v", sched.Status)
	}
	// Logs come from the records only.
	if p, ok := s.LogFile(metav1.NamespaceSystem, "kube-apiserver-n1", components.APIServer); !ok || p != "/var/lib/nodekit/logs/kube-apiserver.log" {
		t.Errorf("LogFile = %q, %v", p, ok)
	}
	for _, c := range [][3]string{{"default", "kube-apiserver-n1", ""}, {"kube-system", "kube-apiserver-n1", "etcd"}, {"kube-system", "coredns-1", ""}} {
		if _, ok := s.LogFile(c[0], c[1], c[2]); ok {
			t.Errorf("LogFile(%v) served a file", c)
		}
	}
	// A restart: the record's restarts reach the pod; a deleted mirror pod comes back; a removed record's pod goes.
	if _, err := components.Started(dir, components.Scheduler, os.Getpid(), time.Now(), []string{"nodekit", "server", "--run-component=kube-scheduler"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, "kube-apiserver-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod of another source that is not this node's process must stay.
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-1", Namespace: metav1.NamespaceSystem}, Spec: v1.PodSpec{NodeName: "n1"}}
	client.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, other, metav1.CreateOptions{})
	components.Remove(dir, components.Etcd)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sched, _ = client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "kube-scheduler-n1", metav1.GetOptions{})
	if cs := sched.Status.ContainerStatuses[0]; cs.RestartCount != 1 || !cs.Ready {
		t.Errorf("after a restart: %+v", cs)
	}
	if _, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "kube-apiserver-n1", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted mirror pod not recreated: %v", err)
	}
	components.Remove(dir, components.Scheduler)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	list, _ := client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	got := map[string]bool{}
	for _, p := range list.Items {
		got[p.Name] = true
	}
	if got["kube-scheduler-n1"] || !got["kube-apiserver-n1"] || !got["coredns-1"] {
		t.Errorf("pods after the scheduler's record went: %v", got)
	}
}
