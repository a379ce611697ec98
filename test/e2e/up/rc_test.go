package up

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/examples"
	"github.com/nodekit/nodekit/runtime/cri"
)

const rcSelector = "app=rc-e2e"

// assertReplicationController runs a ReplicationController on the real node: an RC of 2 (the demo
// pod spec, container rc-server) comes up with 2 Ready pods whose containers run in containerd; scaled
// to 3 through /scale; a deleted pod is replaced by a new running one; orphan deletion keeps the 3 pods
// (and their containers) running without an owner; a second RC adopts them without restarting any;
// foreground deletion removes the pods and their containers before the RC itself goes.
func (e *env) assertReplicationController(t *testing.T, client kubernetes.Interface, rt *cri.Client, tmpl v1.PodTemplateSpec) {
	t.Helper()
	ctx := context.Background()
	rcs := client.CoreV1().ReplicationControllers(examples.DemoNamespace)
	tmpl = *tmpl.DeepCopy()
	tmpl.Labels = map[string]string{"app": "rc-e2e"}
	tmpl.Spec.Containers[0].Name = "rc-server"
	two := int32(2)
	rc, err := rcs.Create(ctx, &v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc-e2e"},
		Spec: v1.ReplicationControllerSpec{Replicas: &two, Template: &tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pods := e.waitRC(t, client, rt, "rc-e2e", rc.UID, 2)
	t.Logf("RC of 2 Ready in %v", time.Since(start).Round(100*time.Millisecond))
	defer func() {
		t.Logf("ReplicationController scenario took %v", time.Since(start).Round(100*time.Millisecond))
	}()

	if _, err := rcs.UpdateScale(ctx, "rc-e2e", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "rc-e2e"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods = e.waitRC(t, client, rt, "rc-e2e", rc.UID, 3)

	victim := pods[0]
	if err := client.CoreV1().Pods(examples.DemoNamespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, 2*time.Minute, "deleted RC pod gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(examples.DemoNamespace).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("pod %s: %v", victim.Name, err)
	})
	pods = e.waitRC(t, client, rt, "rc-e2e", rc.UID, 3)
	for _, p := range pods {
		if p.UID == victim.UID {
			t.Fatalf("deleted pod %s still counted", p.Name)
		}
	}

	orphan := metav1.DeletePropagationOrphan
	if err := rcs.Delete(ctx, "rc-e2e", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, time.Minute, "RC gone, its pods orphaned", func() (bool, string) {
		if _, err := rcs.Get(ctx, "rc-e2e", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("rc: %v", err)
		}
		for _, p := range pods {
			got, err := client.CoreV1().Pods(examples.DemoNamespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.UID != p.UID || len(got.OwnerReferences) != 0 || got.DeletionTimestamp != nil {
				return false, fmt.Sprintf("pod %s: %v, owners %v", p.Name, err, got.OwnerReferences)
			}
		}
		return true, ""
	})

	rc2, err := rcs.Create(ctx, &v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc-e2e-2"},
		Spec: v1.ReplicationControllerSpec{Replicas: ptr32(3), Template: &tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adopted := e.waitRC(t, client, rt, "rc-e2e-2", rc2.UID, 3)
	for i, p := range adopted {
		if !hasPod(pods, p.UID) {
			t.Errorf("rc-e2e-2 has pod %s (%d), not one of the orphans: it made a pod instead of adopting", p.Name, i)
		}
	}

	fg := metav1.DeletePropagationForeground
	if err := rcs.Delete(ctx, "rc-e2e-2", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, 2*time.Minute, "foreground deletion of rc-e2e-2", func() (bool, string) {
		_, rerr := rcs.Get(ctx, "rc-e2e-2", metav1.GetOptions{})
		l, err := client.CoreV1().Pods(examples.DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: rcSelector})
		if err != nil {
			return false, err.Error()
		}
		if apierrors.IsNotFound(rerr) && len(l.Items) > 0 {
			t.Fatalf("rc-e2e-2 removed while %d of its pods remain", len(l.Items))
		}
		running := e.rcContainers(t, rt)
		return apierrors.IsNotFound(rerr) && len(l.Items) == 0 && len(running) == 0,
			fmt.Sprintf("rc: %v, %d pods, %d running containers", rerr, len(l.Items), len(running))
	})
}

// waitRC waits until RC name (uid) has want Ready pods it controls, each with a running rc-server
// container in containerd, and its status says so; it returns the pods.
func (e *env) waitRC(t *testing.T, client kubernetes.Interface, rt *cri.Client, name string, uid types.UID, want int32) []v1.Pod {
	t.Helper()
	ctx := context.Background()
	var pods []v1.Pod
	e.waitFor(t, client, 2*time.Minute, fmt.Sprintf("%d Ready pods of %s", want, name), func() (bool, string) {
		l, err := client.CoreV1().Pods(examples.DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: rcSelector})
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		running := e.rcContainers(t, rt)
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != uid || ref.Kind != "ReplicationController" {
				return false, fmt.Sprintf("pod %s owners %v", p.Name, p.OwnerReferences)
			}
			if p.Status.Phase != v1.PodRunning || !podReady(&p) || !running[p.Name] {
				return false, fmt.Sprintf("pod %s phase %s ready %v container running %v", p.Name, p.Status.Phase, podReady(&p), running[p.Name])
			}
			pods = append(pods, p)
		}
		rc, err := client.CoreV1().ReplicationControllers(examples.DemoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := rc.Status
		if len(pods) != int(want) || st.Replicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want || st.ObservedGeneration != rc.Generation {
			return false, fmt.Sprintf("%d Ready pods, status %+v", len(pods), st)
		}
		return true, ""
	})
	return pods
}

// rcContainers returns the pod names of the running rc-server containers in containerd.
func (e *env) rcContainers(t *testing.T, rt *cri.Client) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, c := range runningContainers(t, rt, "rc-server") {
		out[c.Labels["io.kubernetes.pod.name"]] = true
	}
	return out
}

func hasPod(pods []v1.Pod, uid types.UID) bool {
	for _, p := range pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

func ptr32(n int32) *int32 { return &n }
