package controlplane

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// availabilityWatcher watches the pods of one app and records the fewest Ready, not-deleting pods
// seen at any event once armed.
type availabilityWatcher struct {
	mu     sync.Mutex
	pods   map[string]*v1.Pod
	armed  bool
	min    int
	events int
}

func (w *availabilityWatcher) readyNow() int {
	n := 0
	for _, p := range w.pods {
		if p.DeletionTimestamp == nil && isReady(p) {
			n++
		}
	}
	return n
}

func watchAvailability(t *testing.T, c *cluster, selector string) *availabilityWatcher {
	w := &availabilityWatcher{pods: map[string]*v1.Pod{}, min: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	must(t, err)
	for i := range list.Items {
		w.pods[list.Items[i].Name] = &list.Items[i]
	}
	wi, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	must(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			w.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(w.pods, p.Name)
			} else {
				w.pods[p.Name] = p
			}
			w.events++
			if w.armed {
				w.min = min(w.min, w.readyNow())
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); wi.Stop(); <-done })
	return w
}

func (w *availabilityWatcher) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = true
	w.min = w.readyNow()
}

// TestRollingUpdateKeepsAvailabilityAndEndpointSlicesFollowReadiness rolls a 4-replica Deployment
// (maxUnavailable 1, maxSurge 1) from v1 to v2 while a watcher checks that at least 3 pods are Ready
// at every observed moment; pods become Ready only 300 ms after they run, so the rollout really waits
// on readiness. The Service's EndpointSlices and Endpoints then list exactly the ready pods, with the
// named target port resolved, and follow a pod turning unready. Then, in the same cluster, pod hostnames in endpoints and the
// EndpointSlice mirroring controller (testEndpointHostnames).
func TestRollingUpdateKeepsAvailabilityAndEndpointSlicesFollowReadiness(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	var mu sync.Mutex
	firstSeen := map[string]time.Time{}
	forcedUnready := map[string]bool{}
	readiness := func(p *v1.Pod) bool {
		mu.Lock()
		defer mu.Unlock()
		if forcedUnready[p.Name] {
			return false
		}
		if _, ok := firstSeen[p.Name]; !ok {
			firstSeen[p.Name] = time.Now()
		}
		return time.Since(firstSeen[p.Name]) > 300*time.Millisecond
	}
	for _, name := range []string{"node-a", "node-b"} {
		n := c.addNode(name, "4", "8Gi")
		n.Ready = readiness
	}

	d := demoDeployment("web", 4, "demo:v1")
	one := intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one, MaxSurge: &one}}
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"tier": "frontend"}},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolTCP}}},
	}
	_, err = c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	must(t, err)

	waitComplete := func(image string) {
		eventually(t, 60*time.Second, "rollout of "+image, func() error {
			d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			var prog *appsv1.DeploymentCondition
			for i := range d.Status.Conditions {
				if d.Status.Conditions[i].Type == appsv1.DeploymentProgressing {
					prog = &d.Status.Conditions[i]
				}
			}
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 4 || d.Status.AvailableReplicas != 4 ||
				d.Status.Replicas != 4 || prog == nil || prog.Reason != "NewReplicaSetAvailable" {
				return errorf("generation %d status %+v", d.Generation, d.Status)
			}
			pods, err := c.activePods("default", "app=web")
			if err != nil {
				return err
			}
			for _, p := range pods {
				if p.Spec.Containers[0].Image != image {
					return errorf("pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
				}
			}
			return nil
		})
	}
	waitComplete("demo:v1")

	w := watchAvailability(t, c, "app=web")
	w.arm()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "demo:v2"
		_, err = c.Client.AppsV1().Deployments("default").Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}))
	waitComplete("demo:v2")

	w.mu.Lock()
	minReady, events := w.min, w.events
	w.mu.Unlock()
	t.Logf("rollout observed over %d pod events; fewest ready pods at any moment: %d", events, minReady)
	if minReady < 3 {
		t.Fatalf("ready pods dropped to %d during the rollout, want >= replicas-maxUnavailable = 3", minReady)
	}
	if events < 8 {
		t.Fatalf("watcher saw only %d pod events during a 4-pod rollout", events)
	}

	// Revision history: two ReplicaSets, the old one at 0, revisions 1 and 2.
	rss, err := c.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	must(t, err)
	revs := map[string]int32{}
	for _, rs := range rss.Items {
		revs[rs.Annotations["deployment.kubernetes.io/revision"]] = *rs.Spec.Replicas
	}
	if len(rss.Items) != 2 || revs["1"] != 0 || revs["2"] != 4 {
		t.Fatalf("replicasets by revision = %v (%d sets), want 1→0, 2→4", revs, len(rss.Items))
	}

	// EndpointSlices list exactly the ready pods, port "http" resolved to 8080.
	readyIPs := func() []string {
		pods, err := c.activePods("default", "app=web")
		must(t, err)
		var ips []string
		for _, p := range pods {
			if isReady(&p) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		sort.Strings(ips)
		return ips
	}
	sliceState := func() (ready, notReady []string, err error) {
		list, err := c.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return nil, nil, err
		}
		for _, s := range list.Items {
			if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || s.Labels["tier"] != "frontend" {
				return nil, nil, errorf("slice %s labels %v", s.Name, s.Labels)
			}
			if len(s.Endpoints) > 0 && (len(s.Ports) != 1 || *s.Ports[0].Port != 8080 || *s.Ports[0].Name != "http") {
				return nil, nil, errorf("slice %s ports %+v", s.Name, s.Ports)
			}
			for _, e := range s.Endpoints {
				if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.NodeName == nil {
					return nil, nil, errorf("endpoint %v without pod/node", e.Addresses)
				}
				if *e.Conditions.Ready {
					ready = append(ready, e.Addresses[0])
				} else {
					notReady = append(notReady, e.Addresses[0])
				}
			}
		}
		sort.Strings(ready)
		sort.Strings(notReady)
		return ready, notReady, nil
	}
	eventually(t, 20*time.Second, "endpoint slices = ready pods", func() error {
		ready, notReady, err := sliceState()
		if err != nil {
			return err
		}
		want := readyIPs()
		if len(want) != 4 || !equalStrings(ready, want) || len(notReady) != 0 {
			return errorf("slices ready=%v notReady=%v, pods ready=%v", ready, notReady, want)
		}
		return nil
	})

	// One pod turns unready: its endpoint stays with ready=false, and Endpoints moves it to
	// notReadyAddresses.
	pods, err := c.activePods("default", "app=web")
	must(t, err)
	victim := pods[0]
	mu.Lock()
	forcedUnready[victim.Name] = true
	mu.Unlock()
	eventually(t, 20*time.Second, "unready pod reflected", func() error {
		_, notReady, err := sliceState()
		if err != nil {
			return err
		}
		if !equalStrings(notReady, []string{victim.Status.PodIP}) {
			return errorf("slice notReady = %v, want [%s]", notReady, victim.Status.PodIP)
		}
		ep, err := c.Client.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 3 || len(ep.Subsets[0].NotReadyAddresses) != 1 ||
			ep.Subsets[0].NotReadyAddresses[0].IP != victim.Status.PodIP || ep.Subsets[0].Ports[0].Port != 8080 {
			return errorf("endpoints subsets %+v", ep.Subsets)
		}
		return nil
	})

	// Deleting the Service removes its Endpoints (they have no owner), as upstream's endpoints
	// controller does (conformance "should create and delete Endpoints for a Service with a selector
	// that matches no pods").
	must(t, c.Client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, 20*time.Second, "endpoints removed with their service", func() error {
		if _, err := c.Client.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errorf("endpoints default/web after the service's deletion: %v", err)
		}
		return nil
	})

	testEndpointHostnames(t, c)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRecreateNeverMixesVersions: with the Recreate strategy every v1 pod is gone before the first v2
// pod is created; a watcher checks that no two versions exist at any observed moment.
func TestRecreateNeverMixesVersions(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("node-a", "4", "8Gi")
	d := demoDeployment("batch", 3, "demo:v1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	readyWith := func(image string) func() error {
		return func() error {
			pods, err := c.activePods("default", "app=batch")
			if err != nil {
				return err
			}
			n := 0
			for _, p := range pods {
				if p.Spec.Containers[0].Image == image && isReady(&p) {
					n++
				}
			}
			if n != 3 || len(pods) != 3 {
				return errorf("%d pods, %d ready with %s", len(pods), n, image)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "3 v1 pods", readyWith("demo:v1"))

	w := watchAvailability(t, c, "app=batch")
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Client.AppsV1().Deployments("default").Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "demo:v2"
		_, err = c.Client.AppsV1().Deployments("default").Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}))
	mixed := false
	deadline := time.Now().Add(40 * time.Second)
	for readyWith("demo:v2")() != nil {
		w.mu.Lock()
		images := map[string]bool{}
		for _, p := range w.pods {
			images[p.Spec.Containers[0].Image] = true // terminating v1 pods count too: Recreate waits for them
		}
		w.mu.Unlock()
		if len(images) > 1 {
			mixed = true
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recreate did not complete: %v", readyWith("demo:v2")())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if mixed {
		t.Fatal("v1 and v2 pods existed at the same time under the Recreate strategy")
	}
}
