package controlplane

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestPodDisruptionBudgetEvictionAndDrain serves a PodDisruptionBudget minAvailable 2 over a
// Deployment of 3: the disruption controller writes its status (3 healthy, 2 desired, 1 allowed);
// of two concurrent evictions exactly one is allowed and the other gets 429 with upstream's
// message; a budget with both minAvailable and maxUnavailable is refused with 422; and `kubectl
// drain` of the node holding all three pods moves them to the other node one eviction at a time,
// retrying on the budget's 429s.
func TestPodDisruptionBudgetEvictionAndDrain(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("pdb-a", "4", "8Gi")
	pdbs := c.Client.PolicyV1().PodDisruptionBudgets("default")

	both := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "both", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("200%"))}}
	if _, err := pdbs.Create(ctx, both, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "cannot be both set") || !strings.Contains(err.Error(), "spec.maxUnavailable") {
		t.Fatalf("minAvailable+maxUnavailable 200%%: want 422 naming both, got %v", err)
	}

	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("guarded", 3, "demo-server"), metav1.CreateOptions{})
	must(t, err)
	pdb, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}, metav1.CreateOptions{})
	must(t, err)
	waitBudget := func(what string, healthy, allowed int32) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			p, err := pdbs.Get(ctx, pdb.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := p.Status
			cond := "missing"
			for _, c := range s.Conditions {
				if c.Type == policyv1.DisruptionAllowedCondition {
					cond = string(c.Status) + "/" + c.Reason
				}
			}
			wantCond := "False/InsufficientPods"
			if allowed > 0 {
				wantCond = "True/SufficientPods"
			}
			if s.CurrentHealthy != healthy || s.DesiredHealthy != 2 || s.ExpectedPods < 3 || s.DisruptionsAllowed != allowed ||
				s.ObservedGeneration != p.Generation || cond != wantCond {
				return errorf("status %+v condition %s", s, cond)
			}
			return nil
		})
	}
	waitBudget("budget: 3 healthy, 1 disruption allowed", 3, 1)

	pods, err := c.activePods("default", "app=guarded")
	must(t, err)
	if len(pods) != 3 {
		t.Fatalf("%d pods", len(pods))
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Client.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: pods[i].Name, Namespace: "default"}})
		}()
	}
	wg.Wait()
	allowedN, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			allowedN++
		case apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget."):
			refused++
		default:
			t.Fatalf("eviction: unexpected error %v", err)
		}
	}
	if allowedN != 1 || refused != 1 {
		t.Fatalf("two concurrent evictions: %d allowed, %d refused (errors %v)", allowedN, refused, errs)
	}
	// An evicted pod is marked DisruptionTarget before its deletion (as upstream's eviction; a Job's
	// podFailurePolicy matches on it): a watch sees the condition before the pod goes.
	created, err := c.Client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evicted", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "nowhere", Containers: []v1.Container{{Name: "c", Image: "demo-server"}}}}, metav1.CreateOptions{})
	must(t, err)
	w, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=evicted", ResourceVersion: created.ResourceVersion})
	must(t, err)
	must(t, c.Client.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "evicted", Namespace: "default"}}))
	marked := false
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*v1.Pod)
		if !ok {
			t.Fatalf("watch: %v %v", ev.Type, ev.Object)
		}
		for _, cond := range p.Status.Conditions {
			marked = marked || (cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue && cond.Reason == "EvictionByEvictionAPI" && cond.Message == "Eviction API: evicting")
		}
		if marked || ev.Type == watch.Deleted {
			break
		}
	}
	w.Stop()
	if !marked {
		t.Fatal("evicted pod was never marked DisruptionTarget")
	}
	// The ReplicaSet replaces the evicted pod; the budget allows one disruption again.
	waitBudget("budget back to 3 healthy after the replacement", 3, 1)

	// A terminal pod is always evictable, whatever its budget says.
	done, err := c.Client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "finished", Namespace: "default",
		Labels: map[string]string{"app": "guarded"}}, Spec: v1.PodSpec{NodeName: "nowhere", Containers: []v1.Container{{Name: "c", Image: "demo-server"}}}}, metav1.CreateOptions{})
	must(t, err)
	done.Status.Phase = v1.PodSucceeded
	_, err = c.Client.CoreV1().Pods("default").UpdateStatus(ctx, done, metav1.UpdateOptions{})
	must(t, err)

	must(t, c.Client.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "finished", Namespace: "default"}}))

	// kubectl 1.37 when the conformance cache has built it, else the kubectl on PATH.
	kubectl := "/var/cache/nodekit/conformance/v1.37.2/bin/kubectl"
	if _, err := exec.LookPath(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("kubectl not installed: drain not tried")
		}
	}

	c.addNode("pdb-b", "4", "8Gi")
	start := time.Now()
	out, err := exec.Command(kubectl, "--kubeconfig", c.KubeconfigPath, "drain", "pdb-a", "--ignore-daemonsets", "--timeout=90s").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl drain: %v\n%s", err, out)
	}
	t.Logf("drain took %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(string(out), "Cannot evict pod as it would violate the pod's disruption budget") || !strings.Contains(string(out), "node/pdb-a drained") {
		t.Fatalf("drain of 3 pods under a budget allowing 1 should have been refused and retried:\n%s", out)
	}
	eventually(t, 30*time.Second, "all 3 pods ready on pdb-b", func() error {
		pods, err := c.activePods("default", "app=guarded")
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range pods {
			if p.Spec.NodeName == "pdb-b" && isReady(&p) {
				ready++
			}
		}
		if ready != 3 || len(pods) != 3 {
			return errorf("%d pods, %d ready on pdb-b", len(pods), ready)
		}
		return nil
	})
}
