package daemonset

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func node(name string, labels map[string]string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{Taints: taints}}
}

func daemonSet(selector map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default", UID: "ds-uid", Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: v1.PodSpec{NodeSelector: selector, Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
}

func TestPlacement(t *testing.T) {
	ds := daemonSet(map[string]string{"role": "worker"})
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	worker := map[string]string{"role": "worker"}
	for _, tc := range []struct {
		node               *v1.Node
		run, continueToRun bool
	}{
		{node("plain", worker), true, true},
		{node("infra", map[string]string{"role": "infra"}), false, false},
		{node("gpu", worker, v1.Taint{Key: "gpu", Value: "a100", Effect: v1.TaintEffectNoSchedule}), true, true},
		{node("dedicated", worker, v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoSchedule}), false, true},
		{node("evicting", worker, v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoExecute}), false, false},
		// Taints every daemon pod tolerates (upstream's added tolerations).
		{node("not-ready", worker, v1.Taint{Key: taintNotReady, Effect: v1.TaintEffectNoExecute}), true, true},
		{node("unreachable", worker, v1.Taint{Key: taintUnreachable, Effect: v1.TaintEffectNoExecute}), true, true},
		{node("disk", worker, v1.Taint{Key: taintDiskPressure, Effect: v1.TaintEffectNoSchedule}), true, true},
		{node("memory", worker, v1.Taint{Key: taintMemoryPressure, Effect: v1.TaintEffectNoSchedule}), true, true},
		{node("pid", worker, v1.Taint{Key: taintPIDPressure, Effect: v1.TaintEffectNoSchedule}), true, true},
		{node("cordoned", worker, v1.Taint{Key: taintUnschedulable, Effect: v1.TaintEffectNoSchedule}), true, true},
		{node("no-network", worker, v1.Taint{Key: taintNetworkUnavailable, Effect: v1.TaintEffectNoSchedule}), false, true},
	} {
		run, cont := placement(ds, tc.node)
		if run != tc.run || cont != tc.continueToRun {
			t.Errorf("node %s: shouldRun=%v shouldContinueRunning=%v, want %v %v", tc.node.Name, run, cont, tc.run, tc.continueToRun)
		}
	}
	// Required node affinity counts too, and is kept (with the node's matchFields) on the pod.
	ds.Spec.Template.Spec.NodeSelector = nil
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "role", Operator: v1.NodeSelectorOpIn, Values: []string{"infra"}}}}}}}}
	if run, _ := placement(ds, node("w", worker)); run {
		t.Error("node affinity role In [infra] matched a worker")
	}
	if run, _ := placement(ds, node("i", map[string]string{"role": "infra"})); !run {
		t.Error("node affinity role In [infra] did not match an infra node")
	}
	pod := newPod(ds, "i", "h1")
	term := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
	if len(term.MatchExpressions) != 1 || len(term.MatchFields) != 1 || term.MatchFields[0].Key != "metadata.name" || term.MatchFields[0].Values[0] != "i" {
		t.Fatalf("pod node affinity term = %+v", term)
	}
	if targetNode(pod) != "i" || pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != "h1" || len(pod.Spec.Tolerations) != 7 {
		t.Fatalf("pod target=%q labels=%v tolerations=%v", targetNode(pod), pod.Labels, pod.Spec.Tolerations)
	}
}

func readyPod(name, node, hash string, ready bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}},
		Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	if ready {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	}
	return p
}

func TestRollingUpdateDecisions(t *testing.T) {
	ds := daemonSet(nil)
	mk := func(pods ...*v1.Pod) []*nodeState {
		var out []*nodeState
		for _, p := range pods {
			out = append(out, &nodeState{node: node(p.Spec.NodeName, nil), shouldRun: true, shouldContinueRun: true, pods: []*v1.Pod{p}})
		}
		return out
	}
	names := func(ps []*v1.Pod) []string {
		var n []string
		for _, p := range ps {
			n = append(n, p.Name)
		}
		sort.Strings(n)
		return n
	}
	// maxUnavailable 1: one available old pod goes; an unavailable old pod always may.
	states := mk(readyPod("a", "n1", "old", true), readyPod("b", "n2", "old", true), readyPod("c", "n3", "old", false))
	create, del := rollingUpdate(ds, states, "new", 0, 1, time.Now())
	if len(create) != 0 || fmt.Sprint(names(del)) != "[c]" {
		t.Fatalf("maxUnavailable=1 with an unready old pod: create %v delete %v, want delete only [c]", create, names(del))
	}
	states = mk(readyPod("a", "n1", "old", true), readyPod("b", "n2", "old", true), readyPod("c", "n3", "old", true))
	_, del = rollingUpdate(ds, states, "new", 0, 2, time.Now())
	if len(del) != 2 {
		t.Fatalf("maxUnavailable=2: deleted %v", names(del))
	}
	// A node still waiting for its updated pod uses up the budget.
	states = mk(readyPod("a", "n1", "new", false), readyPod("b", "n2", "old", true))
	if _, del = rollingUpdate(ds, states, "new", 0, 1, time.Now()); len(del) != 0 {
		t.Fatalf("budget used by an unready updated pod, yet deleted %v", names(del))
	}
	// maxSurge 1: create next to an available old pod; delete the old one once the new is available.
	states = mk(readyPod("a", "n1", "old", true), readyPod("b", "n2", "old", true))
	create, del = rollingUpdate(ds, states, "new", 1, 0, time.Now())
	if fmt.Sprint(create) != "[n1]" || len(del) != 0 {
		t.Fatalf("maxSurge=1: create %v delete %v, want create [n1]", create, names(del))
	}
	states[0].pods = append(states[0].pods, readyPod("a2", "n1", "new", true))
	create, del = rollingUpdate(ds, states, "new", 1, 0, time.Now())
	if fmt.Sprint(create) != "[n2]" || fmt.Sprint(names(del)) != "[a]" {
		t.Fatalf("maxSurge=1 after n1's new pod is ready: create %v delete %v, want [n2] and [a]", create, names(del))
	}
}

func TestDaemonSetPodPerNodeAndRollingUpdate(t *testing.T) {
	ds := daemonSet(map[string]string{"role": "worker"})
	client := fake.NewClientset(ds,
		node("n1", map[string]string{"role": "worker"}), node("n2", map[string]string{"role": "worker"}),
		node("n3", map[string]string{"role": "infra"}))
	controllertest.StatusSubresource(client, "daemonsets", "pods")
	controllertest.GenerateNames(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })

	// podsByNode returns node -> hash of the pods, once there is exactly one per node in want.
	podsByNode := func(want ...string) map[string]*v1.Pod {
		t.Helper()
		out := map[string]*v1.Pod{}
		controllertest.Eventually(t, "one pod on each of "+fmt.Sprint(want), func() error {
			list, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			out = map[string]*v1.Pod{}
			for i := range list.Items {
				p := &list.Items[i]
				if _, dup := out[targetNode(p)]; dup {
					return fmt.Errorf("two pods for node %s", targetNode(p))
				}
				out[targetNode(p)] = p
			}
			if len(out) != len(want) {
				return fmt.Errorf("pods on %d nodes, want %v", len(out), want)
			}
			for _, n := range want {
				if out[n] == nil {
					return fmt.Errorf("no pod for %s", n)
				}
			}
			return nil
		})
		return out
	}
	pods := podsByNode("n1", "n2")
	revs, _ := client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	if len(revs.Items) != 1 || revs.Items[0].Revision != 1 || !metav1.IsControlledBy(&revs.Items[0], ds) {
		t.Fatalf("controller revisions = %+v", revs.Items)
	}
	hash1 := revs.Items[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	for n, p := range pods {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash1 || !metav1.IsControlledBy(p, ds) || p.Spec.NodeName != "" {
			t.Fatalf("pod for %s: labels %v owners %v nodeName %q", n, p.Labels, p.OwnerReferences, p.Spec.NodeName)
		}
	}
	// The kubelet side: bind and ready the pods.
	markReady := func(pods map[string]*v1.Pod) {
		for n, p := range pods {
			if p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning {
				continue
			}
			podClient := client.CoreV1().Pods("default")
			controllertest.Modify(t, func() (*v1.Pod, error) { return podClient.Get(ctx, p.Name, metav1.GetOptions{}) },
				func(p *v1.Pod) {
					p.Spec.NodeName = n
					p.Status.Phase = v1.PodRunning
					p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
				},
				func(p *v1.Pod) error { _, err := podClient.Update(ctx, p, metav1.UpdateOptions{}); return err })
		}
	}
	markReady(pods)
	status := func(want appsv1.DaemonSetStatus) {
		t.Helper()
		controllertest.Eventually(t, "status", func() error {
			got, _ := client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
			g := got.Status
			g.CollisionCount, g.Conditions = nil, nil
			if !equality.Semantic.DeepEqual(g, want) {
				return fmt.Errorf("status %+v, want %+v", g, want)
			}
			return nil
		})
	}
	status(appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2,
		UpdatedNumberScheduled: 2, ObservedGeneration: 1})

	// n3 becomes a worker: it gets a pod too. n1 stops being one: its pod goes (misscheduled until then).
	n3, _ := client.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
	n3.Labels["role"] = "worker"
	n1, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n1.Labels["role"] = "infra"
	for _, n := range []*v1.Node{n3, n1} {
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods = podsByNode("n2", "n3")
	markReady(pods)

	// A template change rolls out node by node (maxUnavailable 1) to a second revision.
	daemonSets := client.AppsV1().DaemonSets("default")
	controllertest.Modify(t, func() (*appsv1.DaemonSet, error) { return daemonSets.Get(ctx, "agent", metav1.GetOptions{}) },
		func(cur *appsv1.DaemonSet) {
			cur.Spec.Template.Spec.Containers[0].Image = "demo:v2"
			cur.Generation = 2
		},
		func(cur *appsv1.DaemonSet) error {
			_, err := daemonSets.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	controllertest.Eventually(t, "rolled out to demo:v2", func() error {
		pods := podsByNode("n2", "n3")
		markReady(pods)
		for n, p := range pods {
			if p.Spec.Containers[0].Image != "demo:v2" {
				return fmt.Errorf("node %s still runs %s", n, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
	status(appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2,
		UpdatedNumberScheduled: 2, ObservedGeneration: 2})
	revs, _ = client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	if len(revs.Items) != 2 {
		t.Fatalf("want 2 controller revisions (history), have %d", len(revs.Items))
	}
}
