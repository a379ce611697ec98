package controlplane

import (
	"context"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

func demoDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "web", Image: image,
					Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
						v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}},
				}}},
			},
		},
	}
}

// TestDeploymentScheduledAndSelfHeals is the controller example of SYSTEM.md: a Deployment of 3
// replicas gets a ReplicaSet, 3 pods spread over the nodes; a deleted pod is replaced.
func TestDeploymentScheduledAndSelfHeals(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	for _, name := range []string{"node-a", "node-b"} {
		n := c.addNode(name, "2", "4Gi")
		n.Ready = func(p *v1.Pod) bool { return p.Spec.Containers[0].Image != brokenImage } // a pull that never succeeds
	}

	// Node IPAM: each node gets its own /24 of the cluster CIDR.
	cluster := netip.MustParsePrefix("10.244.0.0/16")
	eventually(t, 20*time.Second, "podCIDRs", func() error {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, n := range nodes.Items {
			p, err := netip.ParsePrefix(n.Spec.PodCIDR)
			if err != nil || p.Bits() != 24 || !cluster.Contains(p.Addr()) || seen[p.String()] {
				return errorf("node %s podCIDR %q", n.Name, n.Spec.PodCIDR)
			}
			seen[p.String()] = true
		}
		return nil
	})
	// ServiceAccount controller: default namespace has its default ServiceAccount.
	eventually(t, 20*time.Second, "default service account", func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})

	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("web", 3, "demo:v1"), metav1.CreateOptions{})
	must(t, err)

	var pods []v1.Pod
	eventually(t, 30*time.Second, "3 scheduled, ready pods", func() error {
		pods, err = c.activePods("default", "app=web")
		if err != nil {
			return err
		}
		if len(pods) != 3 {
			return errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" || !isReady(&p) {
				return errorf("pod %s node=%q ready=%v", p.Name, p.Spec.NodeName, isReady(&p))
			}
		}
		return nil
	})
	nodesUsed := map[string]int{}
	for _, p := range pods {
		nodesUsed[p.Spec.NodeName]++
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.Name, "web-") {
			t.Fatalf("pod %s controller = %+v, want ReplicaSet web-<hash>", p.Name, ref)
		}
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == "" {
			t.Fatalf("pod %s has no pod-template-hash label", p.Name)
		}
	}
	if len(nodesUsed) != 2 {
		t.Fatalf("3 replicas on 2 equal nodes placed %v, want spread over both", nodesUsed)
	}
	eventually(t, 20*time.Second, "deployment status", func() error {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 3 || d.Status.UpdatedReplicas != 3 || d.Annotations["deployment.kubernetes.io/revision"] != "1" {
			return errorf("status %+v annotations %v", d.Status, d.Annotations)
		}
		return nil
	})

	// One pod dies: the ReplicaSet brings the count back to 3 with a new pod.
	victim := pods[0].Name
	must(t, c.Client.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "replacement pod", func() error {
		pods, err := c.activePods("default", "app=web")
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range pods {
			if p.Name == victim {
				return errorf("victim %s still active", victim)
			}
			if p.Spec.NodeName != "" && isReady(&p) {
				ready++
			}
		}
		if len(pods) != 3 || ready != 3 {
			return errorf("%d pods, %d ready", len(pods), ready)
		}
		return nil
	})
	checkDeploymentAdoptsReplicaSet(t, c)
	checkDeploymentScalesProportionally(t, c)
}

// brokenImage is the image of pods the fake nodes never report ready.
const brokenImage = "demo:broken"

// smallDeployment is demoDeployment without resource requests (many pods fit the test's nodes).
func smallDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	d := demoDeployment(name, replicas, image)
	d.Spec.Template.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	return d
}

// replicaSetsOf returns the ReplicaSets controlled by Deployment default/name by revision annotation.
func (c *cluster) replicaSetsOf(name string) (map[string]*appsv1.ReplicaSet, error) {
	d, err := c.Client.AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	list, err := c.Client.AppsV1().ReplicaSets("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*appsv1.ReplicaSet{}
	for i := range list.Items {
		if rs := &list.Items[i]; metav1.IsControlledBy(rs, d) {
			out[rs.Annotations["deployment.kubernetes.io/revision"]] = rs
		}
	}
	return out, nil
}

// checkDeploymentAdoptsReplicaSet is upstream's "RollingUpdateDeployment should delete old pods and
// create new ones" and the adoption half of "should support rollover": an orphan ReplicaSet whose
// labels match a new Deployment's selector (with revision 3546343826724305832) is adopted, the new
// ReplicaSet gets the next revision, its pods count as available during the rollout (maxUnavailable
// 0), and it is scaled to zero once the new one is available.
func checkDeploymentAdoptsReplicaSet(t *testing.T, c *cluster) {
	ctx := context.Background()
	one := int32(1)
	rsLabels := map[string]string{"app": "legacy", "pod": "v1"}
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-controller", Namespace: "default", Labels: rsLabels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "3546343826724305832"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "demo:v1"}}}}},
	}
	_, err := c.Client.AppsV1().ReplicaSets("default").Create(ctx, orphan, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "orphan replicaset available", func() error {
		rs, err := c.Client.AppsV1().ReplicaSets("default").Get(ctx, orphan.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rs.Status.AvailableReplicas != 1 {
			return errorf("status %+v", rs.Status)
		}
		return nil
	})
	d := smallDeployment("legacy", 1, "demo:v2")
	zero, surge := intstr.FromInt32(0), intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &surge}}
	d, err = c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "adoption and rollout to revision 3546343826724305833", func() error {
		cur, err := c.Client.AppsV1().Deployments("default").Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rss, err := c.replicaSetsOf(d.Name)
		if err != nil {
			return err
		}
		old, next := rss["3546343826724305832"], rss["3546343826724305833"]
		if old == nil || old.Name != orphan.Name || next == nil || len(rss) != 2 {
			return errorf("owned replicasets by revision %v", rss)
		}
		if cur.Annotations["deployment.kubernetes.io/revision"] != "3546343826724305833" || *old.Spec.Replicas != 0 ||
			cur.Status.UpdatedReplicas != 1 || cur.Status.AvailableReplicas != 1 || cur.Status.Replicas != 1 {
			return errorf("deployment annotations %v status %+v, old replicaset spec %d", cur.Annotations, cur.Status, *old.Spec.Replicas)
		}
		return nil
	})
}

// checkDeploymentScalesProportionally is upstream's "deployment should support proportional
// scaling": 10 replicas (maxSurge 3, maxUnavailable 2) roll to an image whose pods never become
// ready, so the rollout stalls at 8 old and 5 new replicas; scaled to 30 during it, the 20 more
// replicas (up to 30+3) are shared 12 to the old and 8 to the new ReplicaSet, in proportion to
// their sizes.
func checkDeploymentScalesProportionally(t *testing.T, c *cluster) {
	ctx := context.Background()
	d := smallDeployment("prop", 10, "demo:v1")
	surge, unavail := intstr.FromInt32(3), intstr.FromInt32(2)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &unavail, MaxSurge: &surge}}
	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	sizes := func(want map[string]int32) func() error {
		return func() error {
			rss, err := c.replicaSetsOf(d.Name)
			if err != nil {
				return err
			}
			got := map[string]int32{}
			for rev, rs := range rss {
				got[rev] = *rs.Spec.Replicas
				if rs.Status.ObservedGeneration < rs.Generation || rs.Status.Replicas != *rs.Spec.Replicas {
					return errorf("replicaset %s status %+v spec %d", rs.Name, rs.Status, *rs.Spec.Replicas)
				}
			}
			if !maps.Equal(got, want) {
				return errorf("spec.replicas by revision %v, want %v", got, want)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "10 replicas of revision 1", sizes(map[string]int32{"1": 10}))
	deployments := c.Client.AppsV1().Deployments("default")
	change := func(f func(*appsv1.Deployment)) {
		t.Helper()
		modify(t, func() (*appsv1.Deployment, error) { return deployments.Get(ctx, d.Name, metav1.GetOptions{}) }, f,
			func(cur *appsv1.Deployment) error {
				_, err := deployments.Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
	}
	change(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = brokenImage })
	eventually(t, 30*time.Second, "rollout stalled at 8 old and 5 new", sizes(map[string]int32{"1": 8, "2": 5}))
	change(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](30) })
	eventually(t, 30*time.Second, "scaled in proportion to 20 old and 13 new", sizes(map[string]int32{"1": 20, "2": 13}))
}

// TestSchedulerAgainstAPIServer: an oversized pod is reported Unschedulable with the per-reason
// message, a custom-scheduler pod stays Pending, and a cordoned node is skipped.
func TestSchedulerAgainstAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("small-a", "1", "2Gi")
	c.addNode("small-b", "1", "2Gi")
	c.addNode("gpu", "8", "16Gi")
	node, err := c.Client.CoreV1().Nodes().Get(ctx, "gpu", metav1.GetOptions{})
	must(t, err)
	node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule})
	_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	must(t, err)

	big := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}},
	}
	_, err = c.Client.CoreV1().Pods("default").Create(ctx, big, metav1.CreateOptions{})
	must(t, err)
	custom := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "custom", Namespace: "default"},
		Spec:       v1.PodSpec{SchedulerName: "my-custom-scheduler", Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}},
	}
	_, err = c.Client.CoreV1().Pods("default").Create(ctx, custom, metav1.CreateOptions{})
	must(t, err)

	want := "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}." +
		" preemption: 0/3 nodes are available: 2 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
	eventually(t, 20*time.Second, "Unschedulable condition", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := podCondition(p, v1.PodScheduled)
		if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonUnschedulable || cond.Message != want {
			return errorf("PodScheduled = %+v", cond)
		}
		return nil
	})

	// A toleration update is not possible on a live pod, so a second pod tolerating the taint shows
	// the retry path: it lands on the gpu node.
	tol := big.DeepCopy()
	tol.Name, tol.ResourceVersion = "big-tolerating", ""
	tol.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	_, err = c.Client.CoreV1().Pods("default").Create(ctx, tol, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 20*time.Second, "tolerating pod bound", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "big-tolerating", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "gpu" {
			return errorf("nodeName %q", p.Spec.NodeName)
		}
		if cond := podCondition(p, v1.PodScheduled); cond == nil || cond.Status != v1.ConditionTrue {
			return errorf("PodScheduled = %+v", cond)
		}
		return nil
	})

	// The big pod fits once a larger node joins (retry on node add).
	c.addNode("large", "4", "8Gi")
	eventually(t, 20*time.Second, "big pod bound after node add", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "large" {
			return errorf("nodeName %q", p.Spec.NodeName)
		}
		return nil
	})
	p, err := c.Client.CoreV1().Pods("default").Get(ctx, "custom", metav1.GetOptions{})
	must(t, err)
	if p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending || podCondition(p, v1.PodScheduled) != nil {
		t.Fatalf("custom-scheduler pod: nodeName=%q phase=%s conditions=%v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
	}

	// Cordon every node but small-a: a small pod goes there.
	for _, name := range []string{"small-b", "gpu", "large"} {
		// the fake agent and the node controllers write the Node too: retry on conflict
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Unschedulable = true
			_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}))
	}
	small := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}}}
	time.Sleep(500 * time.Millisecond) // let the scheduler's node cache see the cordons
	_, err = c.Client.CoreV1().Pods("default").Create(ctx, small, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 20*time.Second, "small pod on the only schedulable node", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "small-a" {
			return errorf("nodeName %q", p.Spec.NodeName)
		}
		return nil
	})
}
