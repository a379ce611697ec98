package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/tools/cache"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func podWith(name string, requests, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

func TestPodUsage(t *testing.T) {
	e := NewPodEvaluator(nil)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	e.Now = func() time.Time { return now }
	sidecar := corev1.ContainerRestartPolicyAlways
	withInit := podWith("init", rl("cpu", "100m"), nil)
	withInit.Spec.InitContainers = []corev1.Container{
		{Name: "big-init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
		{Name: "sidecar", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m")}},
	}
	succeeded := podWith("done", rl("cpu", "1"), nil)
	succeeded.Status.Phase = corev1.PodSucceeded
	grace := int64(30)
	expired := podWith("gone", rl("cpu", "1"), nil)
	expired.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	expired.DeletionGracePeriodSeconds = &grace
	deleting := podWith("going", rl("cpu", "1"), nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Second)}
	deleting.DeletionGracePeriodSeconds = &grace
	// spec.overhead (set by the RuntimeClass admission from overhead.podFixed) adds to the requests, and
	// to each limit the pod has (not to memory here: no memory limit), as upstream's PodOverhead.
	overhead := podWith("overhead", rl("cpu", "250m"), rl("cpu", "500m"))
	overhead.Spec.Overhead = rl("cpu", "100m", "memory", "32Mi")
	for _, tc := range []struct {
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{overhead, rl("count/pods", "1", "pods", "1", "cpu", "350m", "requests.cpu", "350m", "limits.cpu", "600m",
			"memory", "32Mi", "requests.memory", "32Mi")},
		{podWith("full", rl("cpu", "250m", "memory", "64Mi", "ephemeral-storage", "1Gi", "example.com/gpu", "2", "hugepages-2Mi", "4Mi"),
			rl("cpu", "500m", "memory", "128Mi")),
			rl("count/pods", "1", "pods", "1", "cpu", "250m", "requests.cpu", "250m", "limits.cpu", "500m",
				"memory", "64Mi", "requests.memory", "64Mi", "limits.memory", "128Mi",
				"ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi", "requests.example.com/gpu", "2",
				"hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi")},
		{podWith("besteffort", nil, nil), rl("count/pods", "1", "pods", "1")},
		// big-init runs before the sidecar starts, alone: the peak is max(1, 100m + 200m)
		{withInit, rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1")},
		{succeeded, rl("count/pods", "1")},
		{expired, rl("count/pods", "1")},
		{deleting, rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1")},
	} {
		got, err := e.Usage(tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if !quotav1.Equals(got, tc.want) {
			t.Errorf("%s: usage %v, want %v", tc.pod.Name, got, tc.want)
		}
	}
}

func TestPodScopes(t *testing.T) {
	deadline := int64(60)
	terminating := podWith("t", rl("cpu", "1"), nil)
	terminating.Spec.ActiveDeadlineSeconds = &deadline
	terminating.Spec.PriorityClassName = "high"
	besteffort := podWith("b", nil, nil)
	exists := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
	}
	prio := func(op corev1.ScopeSelectorOperator, v ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: v}
	}
	for _, tc := range []struct {
		pod   *corev1.Pod
		scope corev1.ScopedResourceSelectorRequirement
		want  bool
	}{
		{terminating, exists(corev1.ResourceQuotaScopeTerminating), true},
		{terminating, exists(corev1.ResourceQuotaScopeNotTerminating), false},
		{besteffort, exists(corev1.ResourceQuotaScopeNotTerminating), true},
		{besteffort, exists(corev1.ResourceQuotaScopeBestEffort), true},
		{terminating, exists(corev1.ResourceQuotaScopeBestEffort), false},
		{terminating, exists(corev1.ResourceQuotaScopeNotBestEffort), true},
		{terminating, exists(corev1.ResourceQuotaScopePriorityClass), true},
		{besteffort, exists(corev1.ResourceQuotaScopePriorityClass), false},
		{terminating, prio(corev1.ScopeSelectorOpIn, "high", "mid"), true},
		{terminating, prio(corev1.ScopeSelectorOpNotIn, "high"), false},
		{besteffort, prio(corev1.ScopeSelectorOpNotIn, "high"), true},
		{besteffort, prio(corev1.ScopeSelectorOpDoesNotExist), true},
		{besteffort, exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), false},
	} {
		got, err := podMatchesScope(tc.scope, tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("pod %s in %s %s %v: %v, want %v", tc.pod.Name, tc.scope.ScopeName, tc.scope.Operator, tc.scope.Values, got, tc.want)
		}
	}
}

func TestPodConstraints(t *testing.T) {
	e := NewPodEvaluator(nil)
	p := podWith("p", rl("cpu", "1"), nil)
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d"})
	err := e.Constraints([]corev1.ResourceName{"requests.cpu", "limits.memory", "pods"}, p)
	if err == nil || err.Error() != "must specify limits.memory for: c,d; requests.cpu for: d" {
		t.Fatalf("constraints: %v", err)
	}
	if err := e.Constraints([]corev1.ResourceName{"requests.cpu", "pods"}, podWith("ok", rl("cpu", "1"), nil)); err != nil {
		t.Fatal(err)
	}
}

func TestServiceUsage(t *testing.T) {
	e := NewServiceEvaluator(nil)
	off := false
	for _, tc := range []struct {
		spec corev1.ServiceSpec
		want corev1.ResourceList
	}{
		{corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}},
			rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		{corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}},
			rl("services", "1", "count/services", "1", "services.nodeports", "2", "services.loadbalancers", "0")},
		{corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: &off,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}, {Port: 443}}},
			rl("services", "1", "count/services", "1", "services.nodeports", "1", "services.loadbalancers", "1")},
	} {
		got, err := e.Usage(&corev1.Service{Spec: tc.spec})
		if err != nil {
			t.Fatal(err)
		}
		if !quotav1.Equals(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.spec.Type, got, tc.want)
		}
	}
}

// TestCalculateUsage sums a namespace's objects through the evaluators as the controller does, with
// listers over an in-memory indexer (a fake informer cache).
func TestCalculateUsage(t *testing.T) {
	store := map[schema.GroupResource]cache.Indexer{}
	add := func(gr schema.GroupResource, objs ...runtime.Object) {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := idx.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		store[gr] = idx
	}
	done := podWith("done", rl("cpu", "1"), nil)
	done.Status.Phase = corev1.PodFailed
	add(corev1.Resource("pods"), podWith("a", rl("cpu", "300m"), nil), podWith("b", nil, nil), done)
	add(corev1.Resource("configmaps"), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: "other"}})
	add(corev1.Resource("services"))
	add(corev1.Resource("secrets"))
	add(corev1.Resource("replicationcontrollers"))
	add(corev1.Resource("resourcequotas"))
	gold := "gold"
	add(ClaimsResource, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold, Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "512Mi")}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "other"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold, Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}})
	listers := func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		return cache.NewGenericLister(store[gvr.GroupResource()], gvr.GroupResource()), nil
	}
	registry := generic.NewRegistry(Evaluators(listers))
	hard := rl("pods", "10", "count/pods", "10", "requests.cpu", "2", "configmaps", "5", "services", "1",
		"persistentvolumeclaims", "3", "gold.storageclass.storage.k8s.io/requests.storage", "1Gi")
	used, err := quotav1.CalculateUsage("ns", nil, hard, registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := rl("pods", "2", "count/pods", "3", "requests.cpu", "300m", "configmaps", "1", "services", "0",
		"persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "512Mi")
	if !quotav1.Equals(used, want) {
		t.Errorf("used %v, want %v", used, want)
	}
	besteffort, err := quotav1.CalculateUsage("ns", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, rl("pods", "10"), registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !quotav1.Equals(besteffort, rl("pods", "1")) {
		t.Errorf("BestEffort used %v, want pods=1", besteffort)
	}
}

func TestCounted(t *testing.T) {
	for name, want := range map[corev1.ResourceName]bool{
		"pods": true, "requests.cpu": true, "count/widgets.example.com": true, "requests.example.com/gpu": true,
		"services.nodeports": true, "secrets": true, "requests.storage": true, "hugepages-1Gi": true,
		"example.com/gpu": false, "limits.example.com/gpu": false,
	} {
		if got := Counted(name); got != want {
			t.Errorf("Counted(%s) = %v, want %v", name, got, want)
		}
	}
}
