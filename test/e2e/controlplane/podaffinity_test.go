package controlplane

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// TestInterPodAffinityAndTopologySpread runs the scheduler against the API server on three nodes in
// two zones (zone-a: z-a1, z-a2; zone-b: z-b): required anti-affinity spreads a Deployment's replicas
// one per node and leaves the fourth Pending with upstream's reason, the existing pods' anti-affinity
// keeps out a pod they repel, required affinity co-locates a Deployment with its database (and lets
// the first pod of a self-affine group start), and a maxSkew 1 zone spread constraint places six
// replicas 3/3 across the zones although zone-a has twice the nodes.
func TestInterPodAffinityAndTopologySpread(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	zones := map[string]string{"z-a1": "zone-a", "z-a2": "zone-a", "z-b": "zone-b"}
	for _, name := range []string{"z-a1", "z-a2", "z-b"} {
		c.addNode(name, "4", "8Gi")
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1.LabelTopologyZone: zones[name]}}})
		_, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		must(t, err)
	}

	t.Run("anti-affinity spreads replicas and leaves the fourth Pending", func(t *testing.T) {
		ns := c.namespace("anti")
		d := testDeployment(ns, "anti", 4, func(s *v1.PodSpec) {
			s.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{appTerm(v1.LabelHostname, "anti")}}}
		})
		_, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		must(t, err)
		const want = "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules." +
			" preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
		var pending string
		eventually(t, 30*time.Second, "3 replicas on 3 nodes, 1 Unschedulable", func() error {
			pods, err := c.activePods(ns, "deploy=anti")
			if err != nil {
				return err
			}
			nodes, unsched := map[string]bool{}, []string{}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					nodes[p.Spec.NodeName] = true
				} else if cond := podCondition(&p, v1.PodScheduled); cond != nil && cond.Reason == v1.PodReasonUnschedulable && cond.Message == want {
					unsched = append(unsched, p.Name)
				}
			}
			if len(pods) != 4 || len(nodes) != 3 || len(unsched) != 1 {
				return errorf("%d pods, bound on %v, unschedulable with the reason: %v", len(pods), nodes, unsched)
			}
			pending = unsched[0]
			return nil
		})
		eventually(t, 10*time.Second, "FailedScheduling event", func() error {
			evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": pending, "reason": "FailedScheduling"}.String()})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Message == want && e.Type == v1.EventTypeWarning {
					return nil
				}
			}
			return errorf("events for %s: %+v", pending, evs.Items)
		})

		// A pod without affinity of its own that the replicas' anti-affinity repels goes nowhere.
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "repelled", map[string]string{"app": "anti"}, nil), metav1.CreateOptions{})
		must(t, err)
		waitUnschedulable(t, c, ns, "repelled", "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."+
			" preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
	})

	t.Run("affinity co-locates", func(t *testing.T) {
		ns := c.namespace("colo")
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "db", map[string]string{"app": "db"}, nil), metav1.CreateOptions{})
		must(t, err)
		dbNode := waitBound(t, c, ns, "db")
		d := testDeployment(ns, "web", 3, func(s *v1.PodSpec) {
			s.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{appTerm(v1.LabelHostname, "db")}}}
		})
		_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		must(t, err)
		eventually(t, 30*time.Second, "3 web replicas on the db's node "+dbNode, func() error {
			pods, err := c.activePods(ns, "deploy=web")
			if err != nil {
				return err
			}
			var on []string
			for _, p := range pods {
				on = append(on, p.Spec.NodeName)
			}
			if len(pods) != 3 || on[0] != dbNode || on[1] != dbNode || on[2] != dbNode {
				return errorf("web pods on %v", on)
			}
			return nil
		})

		// A self-affine group: the first pod is placed although no pod matches yet, the second joins
		// its zone; a pod whose affinity nothing satisfies stays Pending with upstream's reason.
		group := func(s *v1.PodSpec) {
			s.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{appTerm(v1.LabelTopologyZone, "group")}}}
		}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "group-0", map[string]string{"app": "group"}, group), metav1.CreateOptions{})
		must(t, err)
		first := waitBound(t, c, ns, "group-0")
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "group-1", map[string]string{"app": "group"}, group), metav1.CreateOptions{})
		must(t, err)
		if second := waitBound(t, c, ns, "group-1"); zones[second] != zones[first] {
			t.Fatalf("group-1 on %s (%s), group-0 on %s (%s): want one zone", second, zones[second], first, zones[first])
		}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "lonely", map[string]string{"app": "lonely"}, func(s *v1.PodSpec) {
			s.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{appTerm(v1.LabelHostname, "missing")}}}
		}), metav1.CreateOptions{})
		must(t, err)
		waitUnschedulable(t, c, ns, "lonely", "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."+
			" preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	})

	t.Run("maxSkew 1 across zones", func(t *testing.T) {
		ns := c.namespace("spread")
		byZone := func(s *v1.PodSpec) {
			s.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "zone"}}}}
		}
		d := testDeployment(ns, "spread", 6, byZone)
		d.Spec.Template.Labels["spread"] = "zone"
		_, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		must(t, err)
		eventually(t, 30*time.Second, "6 replicas 3/3 across the zones", func() error {
			pods, err := c.activePods(ns, "deploy=spread")
			if err != nil {
				return err
			}
			perZone := map[string]int{}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					perZone[zones[p.Spec.NodeName]]++
				}
			}
			if len(pods) != 6 || perZone["zone-a"] != 3 || perZone["zone-b"] != 3 {
				return errorf("%d pods, bound per zone %v", len(pods), perZone)
			}
			return nil
		})
		// Two more matching pods confined to zone-b (nodeAffinityPolicy Ignore: zone-a still counts):
		// the first makes it 4/3, the second would make the skew 2.
		confined := func(s *v1.PodSpec) {
			byZone(s)
			ignore := v1.NodeInclusionPolicyIgnore
			s.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore
			s.NodeSelector = map[string]string{v1.LabelTopologyZone: "zone-b"}
		}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "extra-0", map[string]string{"spread": "zone"}, confined), metav1.CreateOptions{})
		must(t, err)
		if n := waitBound(t, c, ns, "extra-0"); n != "z-b" {
			t.Fatalf("extra-0 on %s, want z-b", n)
		}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, testPod(ns, "extra-1", map[string]string{"spread": "zone"}, confined), metav1.CreateOptions{})
		must(t, err)
		waitUnschedulable(t, c, ns, "extra-1",
			"0/3 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod topology spread constraints."+
				" preemption: 0/3 nodes are available: 2 Preemption is not helpful for scheduling, 1 No preemption victims found for incoming pod.")
	})
}

// namespace creates a namespace for one subtest (pod affinity terms default to the pod's namespace,
// so subtests do not see each other's pods).
func (c *cluster) namespace(name string) string {
	c.t.Helper()
	_, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(c.t, err)
	return name
}

func appTerm(topologyKey, app string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{TopologyKey: topologyKey, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func testPod(ns, name string, labels map[string]string, mutate func(*v1.PodSpec)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// testDeployment is a Deployment in ns whose pods carry app=<app> and deploy=<app>; it selects only
// deploy=<app>, so that single pods labeled app=<app> are not adopted by its ReplicaSet.
func testDeployment(ns, app string, replicas int32, mutate func(*v1.PodSpec)) *appsv1.Deployment {
	d := demoDeployment(app, replicas, "demo:v1")
	d.Namespace = ns
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"deploy": app}}
	d.Spec.Template.Labels = map[string]string{"app": app, "deploy": app}
	mutate(&d.Spec.Template.Spec)
	return d
}

// waitBound waits until the pod is bound and returns its node.
func waitBound(t *testing.T, c *cluster, ns, name string) string {
	t.Helper()
	var node string
	eventually(t, 30*time.Second, ns+"/"+name+" bound", func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node = p.Spec.NodeName; node == "" {
			return errorf("PodScheduled = %+v", podCondition(p, v1.PodScheduled))
		}
		return nil
	})
	return node
}

// waitUnschedulable waits for PodScheduled=False reason Unschedulable with message want, and checks
// the pod is not bound.
func waitUnschedulable(t *testing.T, c *cluster, ns, name, want string) {
	t.Helper()
	eventually(t, 30*time.Second, ns+"/"+name+" Unschedulable", func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := podCondition(p, v1.PodScheduled)
		if p.Spec.NodeName != "" || cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonUnschedulable || cond.Message != want {
			return errorf("nodeName %q, PodScheduled = %+v", p.Spec.NodeName, cond)
		}
		return nil
	})
}
