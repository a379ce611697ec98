package controlplane

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestDaemonSetOnePodPerNodeAndRollingUpdate runs the DaemonSet controller and the scheduler against
// the API server with three registered nodes: one pod bound to each node its nodeSelector picks, a
// node labelled later gets one, and a template change replaces every pod (maxUnavailable 1) under a
// second ControllerRevision.
func TestDaemonSetOnePodPerNodeAndRollingUpdate(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	for _, n := range []string{"ds-a", "ds-b", "ds-c"} {
		c.addNode(n, "4", "8Gi")
	}
	label := func(name, role string) {
		t.Helper()
		eventually(t, 10*time.Second, "label node "+name, func() error {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Labels["role"] = role
			_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	label("ds-a", "worker")
	label("ds-b", "worker")
	label("ds-c", "infra")

	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: v1.PodSpec{NodeSelector: map[string]string{"role": "worker"},
					Containers: []v1.Container{{Name: "c", Image: "demo-server:v1"}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		},
	}
	_, err := c.Client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{})
	must(t, err)

	// running waits until exactly the nodes want each run one Ready pod of image.
	running := func(image string, want ...string) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("one ready %s pod on each of %v", image, want), func() error {
			pods, err := c.activePods("default", "app=agent")
			if err != nil {
				return err
			}
			var nodes []string
			for _, p := range pods {
				if p.Spec.NodeName == "" || !isReady(&p) || p.Spec.Containers[0].Image != image {
					return errorf("pod %s: node %q ready %v image %s", p.Name, p.Spec.NodeName, isReady(&p), p.Spec.Containers[0].Image)
				}
				nodes = append(nodes, p.Spec.NodeName)
			}
			sort.Strings(nodes)
			if fmt.Sprint(nodes) != fmt.Sprint(want) {
				return errorf("pods on %v", nodes)
			}
			return nil
		})
	}
	status := func(desired, updated int32, generation int64) {
		t.Helper()
		eventually(t, 30*time.Second, "daemonset status", func() error {
			got, err := c.Client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := got.Status
			if s.DesiredNumberScheduled != desired || s.CurrentNumberScheduled != desired || s.NumberReady != desired ||
				s.NumberAvailable != desired || s.UpdatedNumberScheduled != updated || s.NumberMisscheduled != 0 ||
				s.NumberUnavailable != 0 || s.ObservedGeneration != generation {
				return errorf("status %+v", s)
			}
			return nil
		})
	}
	running("demo-server:v1", "ds-a", "ds-b")
	status(2, 2, 1)
	pods, err := c.activePods("default", "app=agent")
	must(t, err)
	for _, p := range pods {
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchFields[0].Values[0] != p.Spec.NodeName {
			t.Fatalf("pod %s on %s has node affinity %+v", p.Name, p.Spec.NodeName, terms)
		}
	}

	label("ds-c", "worker")
	running("demo-server:v1", "ds-a", "ds-b", "ds-c")
	status(3, 3, 1)

	// Roll out v2, watching that at most one node is without a ready pod at any time.
	w := watchAvailability(t, c, "app=agent")
	w.arm()
	cur, err := c.Client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
	must(t, err)
	cur.Spec.Template.Spec.Containers[0].Image = "demo-server:v2"
	_, err = c.Client.AppsV1().DaemonSets("default").Update(ctx, cur, metav1.UpdateOptions{})
	must(t, err)
	running("demo-server:v2", "ds-a", "ds-b", "ds-c")
	status(3, 3, 2)
	w.mu.Lock()
	low := w.min
	w.mu.Unlock()
	if low < 2 {
		t.Fatalf("ready pods fell to %d during the rollout, maxUnavailable is 1 of 3", low)
	}
	revs, err := c.Client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(revs.Items) != 2 {
		t.Fatalf("controllerrevisions: %d, want 2 (revisions 1 and 2)", len(revs.Items))
	}
	eventually(t, 10*time.Second, "SuccessfulCreate events on the DaemonSet", func() error {
		evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "DaemonSet", "involvedObject.name": "agent", "reason": "SuccessfulCreate"}.String()})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return errorf("none yet")
		}
		return nil
	})
}
