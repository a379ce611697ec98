package controlplane

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

// TestControllersConvergeAfterAPIServerRestart cuts every informer's watch by restarting the API
// server, makes changes for each controller while and after it is down, and checks each converges:
// ReplicaSet/Deployment (scale up), scheduler (binds the new pods), EndpointSlice (new Service),
// node IPAM (a new Node gets a podCIDR different from the others), ServiceAccount (new namespace),
// garbage collector (Deployment deleted → its ReplicaSet and pods go), node lifecycle (a node whose
// agent stops goes Unknown) and namespace deletion.
func TestControllersConvergeAfterAPIServerRestart(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("node-a", "4", "8Gi")
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("web", 2, "demo:v1"), metav1.CreateOptions{})
	must(t, err)
	waitReadyPods := func(n int) {
		eventually(t, 40*time.Second, "ready pods", func() error {
			pods, err := c.activePods("default", "app=web")
			if err != nil {
				return err
			}
			ready := 0
			for _, p := range pods {
				if p.Spec.NodeName != "" && isReady(&p) {
					ready++
				}
			}
			if len(pods) != n || ready != n {
				return errorf("%d pods, %d ready, want %d", len(pods), ready, n)
			}
			return nil
		})
	}
	waitReadyPods(2)

	// Cut every watch: stop the API server, wait long enough for clients to notice, start it again.
	c.StopAPIServer()
	time.Sleep(2 * time.Second)
	c.Restart(t)

	// Changes after the restart, one per controller.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		replicas := int32(3)
		d.Spec.Replicas = &replicas
		_, err = c.Client.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		return err
	}))
	_, err = c.Client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	must(t, err)
	nodeB := c.addNode("node-b", "4", "8Gi")

	waitReadyPods(3)
	eventually(t, 20*time.Second, "endpoint slice with 3 ready endpoints", func() error {
		list, err := c.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return err
		}
		n := 0
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					n++
				}
			}
		}
		if n != 3 {
			return errorf("%d ready endpoints in %d slices", n, len(list.Items))
		}
		return nil
	})
	eventually(t, 20*time.Second, "node-b podCIDR", func() error {
		a, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		b, err := c.Client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if b.Spec.PodCIDR == "" || b.Spec.PodCIDR == a.Spec.PodCIDR {
			return errorf("node-a %q node-b %q", a.Spec.PodCIDR, b.Spec.PodCIDR)
		}
		return nil
	})
	eventually(t, 20*time.Second, "default service account in team-a", func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("team-a").Get(ctx, "default", metav1.GetOptions{})
		return err
	})

	// Garbage collection: deleting the Deployment (background propagation) removes its ReplicaSet
	// and, through it, its pods.
	bg := metav1.DeletePropagationBackground
	must(t, c.Client.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &bg}))
	eventually(t, 30*time.Second, "replicasets and pods collected", func() error {
		rss, err := c.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if len(rss.Items) != 0 || len(pods.Items) != 0 {
			return errorf("%d replicasets, %d pods left", len(rss.Items), len(pods.Items))
		}
		return nil
	})

	// Node lifecycle: node-b's agent stops after the restart; it still goes Unknown and is tainted.
	nodeB.Stop()
	eventually(t, labGrace+10*time.Second, "node-b Unknown and tainted after the restart", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rc := readyCondition(n); rc == nil || rc.Status != v1.ConditionUnknown {
			return errorf("Ready = %+v", rc)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1.TaintNodeUnreachable && taint.Effect == v1.TaintEffectNoExecute {
				return nil
			}
		}
		return errorf("taints %+v", n.Spec.Taints)
	})

	// Namespace deletion empties it, then removes it.
	_, err = c.Client.CoreV1().ConfigMaps("team-a").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{})
	must(t, err)
	must(t, c.Client.CoreV1().Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "namespace team-a gone", func() error {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errorf("namespace still there: %v", err)
	})
}

// TestGarbageCollectorOrphanPropagation deletes a Deployment with propagationPolicy Orphan: the API
// server puts the "orphan" finalizer on it, the garbage collector removes the owner reference from its
// ReplicaSet and then the finalizer, and the ReplicaSet (with its pod) survives its owner.
func TestGarbageCollectorOrphanPropagation(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("node-a", "4", "8Gi")
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("keep", 1, "demo:v1"), metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "keep pod", func() error {
		pods, err := c.activePods("default", "app=keep")
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return errorf("%d pods", len(pods))
		}
		return nil
	})
	rss, err := c.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=keep"})
	must(t, err)
	if len(rss.Items) != 1 {
		t.Fatalf("%d replicasets", len(rss.Items))
	}
	// Hold the finalizer in place until we have looked, with a finalizer of our own.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Finalizers = append(d.Finalizers, "e2e.nodekit.io/hold")
		_, err = c.Client.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		return err
	}))
	orphan := metav1.DeletePropagationOrphan
	must(t, c.Client.AppsV1().Deployments("default").Delete(ctx, "keep", metav1.DeleteOptions{PropagationPolicy: &orphan}))
	d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "keep", metav1.GetOptions{})
	must(t, err)
	if !slices.Contains(d.Finalizers, metav1.FinalizerOrphanDependents) {
		t.Skipf("the API server does not implement propagationPolicy=Orphan (no %q finalizer on the deleted Deployment: "+
			"its registries run with garbage collection disabled), so there is nothing for the garbage collector to honour; finalizers=%v",
			metav1.FinalizerOrphanDependents, d.Finalizers)
	}
	eventually(t, 30*time.Second, "orphaned replicaset", func() error {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.Contains(d.Finalizers, metav1.FinalizerOrphanDependents) {
			return errorf("orphan finalizer still on the deployment")
		}
		rs, err := c.Client.AppsV1().ReplicaSets("default").Get(ctx, rss.Items[0].Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(rs.OwnerReferences) != 0 {
			return errorf("owner references %+v", rs.OwnerReferences)
		}
		return nil
	})
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Finalizers = slices.DeleteFunc(d.Finalizers, func(f string) bool { return f == "e2e.nodekit.io/hold" })
		_, err = c.Client.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		return err
	}))
	time.Sleep(time.Second)
	pods, err := c.activePods("default", "app=keep")
	must(t, err)
	if len(pods) != 1 {
		t.Fatalf("%d pods after orphaning, want the 1 pod kept", len(pods))
	}
}

// TestGarbageCollectorForegroundPropagation deletes a Deployment with propagationPolicy Foreground:
// the Deployment stays (foregroundDeletion finalizer) until its ReplicaSet and pods are gone, then
// goes itself.
func TestGarbageCollectorForegroundPropagation(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("node-a", "4", "8Gi")
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("fg", 2, "demo:v1"), metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "fg pods", func() error {
		pods, err := c.activePods("default", "app=fg")
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return errorf("%d pods", len(pods))
		}
		return nil
	})
	fg := metav1.DeletePropagationForeground
	must(t, c.Client.AppsV1().Deployments("default").Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: &fg}))
	d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "fg", metav1.GetOptions{})
	if err == nil && !slices.Contains(d.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("deleted Deployment has finalizers %v, want %q", d.Finalizers, metav1.FinalizerDeleteDependents)
	}
	eventually(t, 30*time.Second, "deployment, replicaset and pods gone", func() error {
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
		if err != nil {
			return err
		}
		rss, err := c.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
		if err != nil {
			return err
		}
		_, err = c.Client.AppsV1().Deployments("default").Get(ctx, "fg", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			if len(pods.Items) == 0 && len(rss.Items) == 0 {
				return errorf("dependents gone but the deployment stays: %v", err)
			}
			return errorf("%d pods, %d replicasets left", len(pods.Items), len(rss.Items))
		}
		if len(pods.Items)+len(rss.Items) != 0 {
			t.Fatalf("deployment deleted before its dependents: %d pods, %d replicasets left", len(pods.Items), len(rss.Items))
		}
		return nil
	})
}

// TestGarbageCollectorBreaksDependencyCircle: three ConfigMaps own each other in a circle with
// blockOwnerDeletion; deleting one in foreground must still remove all three (upstream's
// "should not be blocked by dependency circle" conformance spec does the same with pods): the
// collector makes the blocking references of the object that closes the circle non-blocking.
func TestGarbageCollectorBreaksDependencyCircle(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cms := c.Client.CoreV1().ConfigMaps("default")
	var uids []types.UID
	for _, n := range []string{"circle-1", "circle-2", "circle-3"} {
		cm, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		must(t, err)
		uids = append(uids, cm.UID)
	}
	// circle-1 is owned by circle-3, circle-2 by circle-1, circle-3 by circle-2.
	for i, n := range []string{"circle-1", "circle-2", "circle-3"} {
		owner := (i + 2) % 3
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"circle-%d","uid":"%s","controller":true,"blockOwnerDeletion":true}]}}`,
			owner+1, uids[owner])
		_, err := cms.Patch(ctx, n, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		must(t, err)
	}
	fg := metav1.DeletePropagationForeground
	must(t, cms.Delete(ctx, "circle-1", metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: metav1.NewUIDPreconditions(string(uids[0]))}))
	eventually(t, 60*time.Second, "the circle of ConfigMaps deleted", func() error {
		var left []string
		for _, n := range []string{"circle-1", "circle-2", "circle-3"} {
			cm, err := cms.Get(ctx, n, metav1.GetOptions{})
			if err == nil {
				left = append(left, fmt.Sprintf("%s finalizers %v refs %+v", n, cm.Finalizers, cm.OwnerReferences))
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		if len(left) > 0 {
			return errorf("left: %v", left)
		}
		return nil
	})
}

// TestGarbageCollectorKeepsDependentWithLiveOwner: a ConfigMap owned by one live owner and, with
// blockOwnerDeletion, by one deleted in foreground stays, loses the reference to the deleted owner,
// and the deleted owner goes (upstream's conformance "should not delete dependents that have both
// valid owner and owner that's waiting for dependents to be deleted").
func TestGarbageCollectorKeepsDependentWithLiveOwner(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cms := c.Client.CoreV1().ConfigMaps("default")
	stay, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner-stays"}}, metav1.CreateOptions{})
	must(t, err)
	gone, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner-goes"}}, metav1.CreateOptions{})
	must(t, err)
	yes := true
	_, err = cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: stay.Name, UID: stay.UID},
		{APIVersion: "v1", Kind: "ConfigMap", Name: gone.Name, UID: gone.UID, Controller: &yes, BlockOwnerDeletion: &yes},
	}}}, metav1.CreateOptions{})
	must(t, err)
	fg := metav1.DeletePropagationForeground
	must(t, cms.Delete(ctx, gone.Name, metav1.DeleteOptions{PropagationPolicy: &fg}))
	eventually(t, 60*time.Second, "foreground-deleted owner gone", func() error {
		if _, err := cms.Get(ctx, gone.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errorf("owner-goes still there (err %v)", err)
		}
		return nil
	})
	dep, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
	must(t, err)
	if dep.DeletionTimestamp != nil || len(dep.OwnerReferences) != 1 || dep.OwnerReferences[0].UID != stay.UID {
		t.Fatalf("dependent deletionTimestamp %v owners %+v, want it kept with the live owner only", dep.DeletionTimestamp, dep.OwnerReferences)
	}
}
