package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25"}}}}
}

// TestTypedCRUD creates, gets, lists, updates and deletes one object of every served resource.
func TestTypedCRUD(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c, ns := ctxT(t), s.Client, "default"
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("x", "").Spec}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	port := int32(80)
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crud"}}, metav1.CreateOptions{})
	check("namespace", err)
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	check("node", err)
	p, err := c.CoreV1().Pods(ns).Create(ctx, pod("p1", ""), metav1.CreateOptions{})
	check("pod", err)
	if p.Spec.SchedulerName != "default-scheduler" || *p.Spec.TerminationGracePeriodSeconds != 30 || p.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Fatalf("pod defaults: %+v", p.Spec)
	}
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	check("service", err)
	if !strings.HasPrefix(svc.Spec.ClusterIP, "10.") || svc.Spec.ClusterIP == "10.96.0.1" || svc.Spec.Ports[0].NodePort < 30000 {
		t.Fatalf("service allocation: ip=%s nodePort=%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].NodePort)
	}
	_, err = c.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
	check("endpoints", err)
	_, err = c.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p1", Namespace: ns}, Reason: "Test"}, metav1.CreateOptions{})
	check("event", err)
	_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	check("configmap", err)
	_, err = c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
	check("secret", err)
	_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{})
	check("serviceaccount", err)
	_, err = c.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	check("lease", err)
	_, err = c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port}}}, metav1.CreateOptions{})
	check("endpointslice", err)
	d, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	check("deployment", err)
	if *d.Spec.Replicas != 1 || d.Generation != 1 || *d.Spec.RevisionHistoryLimit != 10 {
		t.Fatalf("deployment defaults: %+v", d.Spec)
	}
	_, err = c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	check("replicaset", err)
	_, err = c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	check("daemonset", err)
	ss, err := c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl, ServiceName: "db"}}, metav1.CreateOptions{})
	check("statefulset", err)
	if ss.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || *ss.Spec.Replicas != 1 ||
		*ss.Spec.UpdateStrategy.RollingUpdate.Partition != 0 || ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Fatalf("statefulset defaults: %+v", ss.Spec)
	}
	ss.Spec.ServiceName = "other"
	if _, err := c.AppsV1().StatefulSets(ns).Update(ctx, ss, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.serviceName") {
		t.Fatalf("statefulset serviceName change: want 422 on spec.serviceName, got %v", err)
	}

	// update spec → generation 2; status via /status only.
	d.Spec.Replicas = new(int32)
	d.Status.Replicas = 7
	d2, err := c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	check("update deployment", err)
	if d2.Generation != 2 || d2.Status.Replicas != 0 {
		t.Fatalf("update: generation=%d status.replicas=%d", d2.Generation, d2.Status.Replicas)
	}
	d2.Status.Replicas = 3
	d3, err := c.AppsV1().Deployments(ns).UpdateStatus(ctx, d2, metav1.UpdateOptions{})
	check("update status", err)
	if d3.Status.Replicas != 3 || d3.Generation != 2 {
		t.Fatalf("status update: %+v", d3.Status)
	}
	sc, err := c.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	check("get scale", err)
	sc.Spec.Replicas = 4
	_, err = c.AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
	check("update scale", err)
	if d4, _ := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); *d4.Spec.Replicas != 4 {
		t.Fatalf("scale did not set replicas: %d", *d4.Spec.Replicas)
	}

	// binding
	check("bind", c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{}))
	p, _ = c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if p.Spec.NodeName != "n1" {
		t.Fatalf("binding: nodeName=%q", p.Spec.NodeName)
	}
	if err := c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Target: corev1.ObjectReference{Name: "n2"}}, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second binding: want 409, got %v", err)
	}

	// graceful deletion of a bound pod: deletionTimestamp set, object stays until grace 0.
	check("delete pod", c.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}))
	p, err = c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("graceful delete: %v %+v", err, p.ObjectMeta)
	}
	zero := int64(0)
	check("force delete", c.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	if _, err := c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}

	// service delete releases its ClusterIP: a new service may claim it explicitly.
	check("delete svc", c.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	_, err = c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "again"},
		Spec: corev1.ServiceSpec{ClusterIP: svc.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	check("reuse released IP", err)
	_, err = c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dup"},
		Spec: corev1.ServiceSpec{ClusterIP: svc.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("duplicate ClusterIP: want 422, got %v", err)
	}

	// deletecollection
	check("deletecollection", c.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	// (the root-ca-cert-publisher controller recreates kube-root-ca.crt at once)
	if l, _ := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"}); len(l.Items) != 0 {
		t.Fatalf("configmaps left: %d", len(l.Items))
	}
	// generateName
	g, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
	check("generateName", err)
	if !strings.HasPrefix(g.Name, "gen-") || len(g.Name) != len("gen-")+5 || g.UID == "" || g.CreationTimestamp.IsZero() {
		t.Fatalf("generateName: %+v", g.ObjectMeta)
	}

	// namespace deletion is two-phase: Terminating until the namespace controller has emptied it and
	// removed the "kubernetes" finalizer through namespaces/finalize (done by hand here).
	_, err = c.CoreV1().ConfigMaps("crud").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	check("cm in crud", err)
	check("delete ns", c.CoreV1().Namespaces().Delete(ctx, "crud", metav1.DeleteOptions{}))
	term, err := c.CoreV1().Namespaces().Get(ctx, "crud", metav1.GetOptions{})
	if err != nil || term.Status.Phase != corev1.NamespaceTerminating || term.DeletionTimestamp == nil {
		t.Fatalf("deleted namespace: want Terminating, got %v %+v", err, term)
	}
	if _, err := c.CoreV1().ConfigMaps("crud").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create in terminating namespace: want 403, got %v", err)
	}
	check("empty crud", c.CoreV1().ConfigMaps("crud").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	term.Spec.Finalizers = nil
	_, err = c.CoreV1().Namespaces().Finalize(ctx, term, metav1.UpdateOptions{})
	check("finalize", err)
	if _, err := c.CoreV1().Namespaces().Get(ctx, "crud", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("finalized terminating namespace still there: %v", err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, "kube-system", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("delete kube-system: want 403, got %v", err)
	}
}

func TestConflictAndPatches(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()
	cm.Data["a"] = "2"
	if _, err := c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Data["a"] = "3"
	if _, err := c.CoreV1().ConfigMaps("default").Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want 409 Conflict, got %v", err)
	}
	cm.ResourceVersion = ""
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("duplicate create: want 409 AlreadyExists, got %v", err)
	}
	for _, tc := range []struct {
		pt    types.PatchType
		patch string
		key   string
	}{
		{types.JSONPatchType, `[{"op":"add","path":"/data/j","value":"json"}]`, "j"},
		{types.MergePatchType, `{"data":{"m":"merge"}}`, "m"},
		{types.StrategicMergePatchType, `{"data":{"s":"strategic"}}`, "s"},
		{types.ApplyPatchType, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"x":"apply"}}`, "x"},
	} {
		opts := metav1.PatchOptions{}
		if tc.pt == types.ApplyPatchType {
			opts.FieldManager = "test"
		}
		out, err := c.CoreV1().ConfigMaps("default").Patch(ctx, "cm", tc.pt, []byte(tc.patch), opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.pt, err)
		}
		if out.Data[tc.key] == "" || out.Data["a"] != "2" {
			t.Fatalf("%s: data=%v", tc.pt, out.Data)
		}
	}
	// strategic merge on a pod's containers list merges by name.
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := c.CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"c","image":"nginx:1.26"}]}}`), metav1.PatchOptions{})
	if err != nil || len(out.Spec.Containers) != 1 || out.Spec.Containers[0].Image != "nginx:1.26" {
		t.Fatalf("strategic merge on containers: %v %+v", err, out)
	}
}

func TestInformerWatchResumeAndCompaction(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	events := make(chan string, 100)
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace("default"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=w" })) // not the controllers' kube-root-ca.crt
	inf := f.Core().V1().ConfigMaps().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { events <- "add:" + o.(*corev1.ConfigMap).Data["v"] },
		UpdateFunc: func(_, o any) {
			events <- "update:" + o.(*corev1.ConfigMap).Data["v"]
		},
		DeleteFunc: func(o any) {
			if cm, ok := o.(*corev1.ConfigMap); ok {
				events <- "delete:" + cm.Data["v"]
			} else {
				events <- "delete:?"
			}
		},
	})
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().ConfigMaps("default").Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("informer events: %v", got)
		}
	}
	if strings.Join(got, ",") != "add:1,update:2,delete:2" {
		t.Fatalf("informer saw %v", got)
	}

	// watch resume: list RV, then changes, then a watch from the list's RV sees them in order.
	list, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ev := <-w.ResultChan()
		if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != fmt.Sprintf("r%d", i) {
			t.Fatalf("resume event %d: %v %v", i, ev.Type, ev.Object)
		}
	}
	w.Stop()

	// 410 Gone on a compacted resourceVersion.
	oldRV := list.ResourceVersion
	cli := s.Etcd(t)
	resp, err := cli.Get(ctx, "/registry/configmaps/default/r2")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ { // move past the watch cache's window
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("z%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision+5); err != nil {
		t.Fatal(err)
	}
	// A restarted API server has only post-compaction history, as after any restart or failover.
	s.Restart(t)
	_, err = c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: oldRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("list at compacted RV: want 410, got %v", err)
	}
	w, err = c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
	if err == nil {
		ev := <-w.ResultChan()
		w.Stop()
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone {
			t.Fatalf("watch from compacted RV: want 410 error event, got %v %v", ev.Type, ev.Object)
		}
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from compacted RV: want 410, got %v", err)
	}
}

func TestFieldSelectorAndNodeIsolation(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := s.NodeClient(t, n).CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("node %s registers itself: %v", n, err)
		}
	}
	for i, n := range []string{"node-a", "node-b", "node-b", ""} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, pod(fmt.Sprintf("p%d", i), n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-b"})
	if err != nil || len(l.Items) != 2 || l.Items[0].Spec.NodeName != "node-b" {
		t.Fatalf("fieldSelector spec.nodeName=node-b: %v %d", err, len(l.Items))
	}
	l, err = c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending,spec.nodeName="})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "p3" {
		t.Fatalf("fieldSelector unscheduled: %v %v", err, l)
	}
	if _, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unsupported field selector: want 400, got %v", err)
	}

	a := s.NodeClient(t, "node-a")
	patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
	if _, err := a.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("node-a patches itself: %v", err)
	}
	if _, err := a.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node-a patches node-b: want 403, got %v", err)
	}
	status := []byte(`{"status":{"phase":"Running"}}`)
	if _, err := a.CoreV1().Pods("default").Patch(ctx, "p0", types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("node-a patches its pod's status: %v", err)
	}
	if _, err := a.CoreV1().Pods("default").Patch(ctx, "p1", types.MergePatchType, status, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Fatalf("node-a patches node-b's pod: want 403, got %v", err)
	}
	if err := a.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node-a deletes node-b's pod: want 403, got %v", err)
	}
	if _, err := a.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node creates a secret: want 403, got %v", err)
	}
	// secrets: a node may get only those its pods refer to, and may not list them.
	for _, name := range []string{"used", "unused"} {
		if _, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ps := pod("uses-secret", "node-a")
	ps.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "used"}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, ps, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a gets a secret its pod mounts", func() error {
		_, err := a.CoreV1().Secrets("default").Get(ctx, "used", metav1.GetOptions{})
		return err
	})
	if _, err := a.CoreV1().Secrets("default").Get(ctx, "unused", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node-a gets an unreferenced secret: want 403, got %v", err)
	}
	if _, err := s.NodeClient(t, "node-b").CoreV1().Secrets("default").Get(ctx, "used", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node-b gets node-a's pod's secret: want 403, got %v", err)
	}
	if _, err := a.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node lists secrets: want 403, got %v", err)
	}
	if _, err := a.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node-a creates its lease: %v", err)
	}
	if _, err := a.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node-a creates node-b's lease: want 403, got %v", err)
	}
}

// TestBadInput sends undecodable, wrong-kind, nameless and badly-labelled bodies: each answers a 4xx
// Status naming the problem and nothing reaches etcd.
func TestBadInput(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, rc := ctxT(t), s.Client.CoreV1().RESTClient()
	cli := s.Etcd(t)
	before, err := cli.Get(ctx, "/registry/", clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body string
		code       int32
		want       string
	}{
		{"undecodable", `{"apiVersion":"v1","kind":"Pod",`, 400, ""},
		{"wrong kind", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":80}]}}`, 400, ""},
		{"missing name", `{"apiVersion":"v1","kind":"Pod","metadata":{},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 422, "metadata.name"},
		{"invalid label", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","labels":{"bad key!":"v"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 422, "metadata.labels"},
		{"bad probe", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","livenessProbe":{"httpGet":{"port":70000}}}]}}`, 422, "spec.containers[0].livenessProbe.httpGet.port"},
		{"no handler", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","readinessProbe":{"periodSeconds":5}}]}}`, 422, "spec.containers[0].readinessProbe"},
	} {
		res := rc.Post().Namespace("default").Resource("pods").Body([]byte(tc.body)).SetHeader("Content-Type", "application/json").Do(ctx)
		err := res.Error()
		st, ok := err.(apierrors.APIStatus)
		if !ok {
			t.Fatalf("%s: want a Status error, got %v", tc.name, err)
		}
		if st.Status().Code != tc.code {
			t.Fatalf("%s: code %d, want %d (%v)", tc.name, st.Status().Code, tc.code, err)
		}
		if tc.want != "" {
			found := false
			for _, cause := range st.Status().Details.Causes {
				if cause.Field == tc.want {
					found = true
				}
			}
			if !found {
				b, _ := json.Marshal(st.Status())
				t.Fatalf("%s: no cause for field %s: %s", tc.name, tc.want, b)
			}
		}
	}
	after, err := cli.Get(ctx, "/registry/pods/", clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	if after.Count != 0 {
		t.Fatalf("bad input reached etcd: %d pod keys", after.Count)
	}
	_ = before
}

// TestEtcdctlShowsJSON reads a stored pod with the real etcdctl.
func TestEtcdctlShowsJSON(t *testing.T) {
	if _, err := exec.LookPath("etcdctl"); err != nil {
		t.Skip("etcdctl not installed (apt-get install etcd-client)")
	}
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("web", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--endpoints", strings.Join(s.EtcdEndpoints, ","), "--cacert", s.EtcdCAFile, "--cert", s.EtcdCertFile, "--key", s.EtcdKeyFile}
	cmd := exec.CommandContext(ctx, "etcdctl", append(tlsFlags, "get", "/registry/pods", "--prefix", "--keys-only")...)
	cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/registry/pods/default/web") {
		t.Fatalf("etcdctl keys: %v %s", err, out)
	}
	cmd = exec.CommandContext(ctx, "etcdctl", append(tlsFlags, "get", "/registry/pods/default/web", "--print-value-only")...)
	cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl get: %v %s", err, out)
	}
	var p corev1.Pod
	if err := json.Unmarshal(out, &p); err != nil || p.Kind != "Pod" || p.APIVersion != "v1" || p.Name != "web" {
		t.Fatalf("stored value is not Pod JSON: %v %s", err, out)
	}
}
