package controlplane

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLifecycleEvictsAndReplaces stops one node's agent: within the (lab) grace period the node
// is Ready=Unknown and tainted unreachable:NoExecute; its pods are evicted only after their
// tolerationSeconds (the API server's DefaultTolerationSeconds, 2 s here) and replaced on the other
// node; when the agent comes back the taint is lifted.
func TestNodeLifecycleEvictsAndReplaces(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	a := c.addNode("node-a", "4", "8Gi")
	c.addNode("node-b", "4", "8Gi")

	_, err := c.Client.AppsV1().Deployments("default").Create(ctx, demoDeployment("web", 4, "demo:v1"), metav1.CreateOptions{})
	must(t, err)
	var onA []string
	eventually(t, 30*time.Second, "4 ready pods on both nodes", func() error {
		pods, err := c.activePods("default", "app=web")
		if err != nil {
			return err
		}
		onA = nil
		for _, p := range pods {
			if !isReady(&p) {
				return errorf("pod %s not ready", p.Name)
			}
			if p.Spec.NodeName == "node-a" {
				onA = append(onA, p.Name)
			}
		}
		if len(pods) != 4 || len(onA) == 0 || len(onA) == 4 {
			return errorf("%d pods, %d on node-a", len(pods), len(onA))
		}
		return nil
	})
	// The pods carry the unreachable toleration that DefaultTolerationSeconds admission adds.
	p, err := c.Client.CoreV1().Pods("default").Get(ctx, onA[0], metav1.GetOptions{})
	must(t, err)
	tolerationSeconds := int64(-1)
	for _, tol := range p.Spec.Tolerations {
		if tol.Key == v1.TaintNodeUnreachable && tol.TolerationSeconds != nil {
			tolerationSeconds = *tol.TolerationSeconds
		}
	}
	if tolerationSeconds != labTolerationSec {
		t.Fatalf("pod tolerations %+v: want unreachable for %ds", p.Spec.Tolerations, labTolerationSec)
	}

	stopped := time.Now()
	a.Stop()
	var taintAdded time.Time
	eventually(t, labGrace+5*time.Second, "node-a Unknown and tainted", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rc := readyCondition(n); rc == nil || rc.Status != v1.ConditionUnknown {
			return errorf("Ready = %+v", rc)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1.TaintNodeUnreachable && taint.Effect == v1.TaintEffectNoExecute && taint.TimeAdded != nil {
				taintAdded = taint.TimeAdded.Time
				return nil
			}
		}
		return errorf("taints %+v", n.Spec.Taints)
	})
	// The last heartbeat was at most one beat interval (500 ms) before the agent stopped.
	if took := time.Since(stopped); took < labGrace-600*time.Millisecond {
		t.Fatalf("node marked Unknown %v after its agent stopped, before the %v grace period", took, labGrace)
	}

	// Eviction: the pods on node-a get deleted, not before tolerationSeconds after the taint.
	eventually(t, 20*time.Second, "pods on node-a evicted", func() error {
		for _, name := range onA {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue // gone
			}
			if p.DeletionTimestamp == nil {
				return errorf("pod %s not evicted yet", name)
			}
			// deletionTimestamp = eviction time + grace period: the eviction itself was at least
			// tolerationSeconds after the taint.
			grace := int64(30)
			if p.DeletionGracePeriodSeconds != nil {
				grace = *p.DeletionGracePeriodSeconds
			}
			evictedAt := p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
			if evictedAt.Before(taintAdded.Add(time.Duration(labTolerationSec)*time.Second - time.Second)) {
				t.Fatalf("pod %s evicted at %v, taint added %v: before tolerationSeconds %d", name, evictedAt, taintAdded, labTolerationSec)
			}
		}
		return nil
	})
	eventually(t, 30*time.Second, "4 ready replacements, all on node-b", func() error {
		pods, err := c.activePods("default", "app=web")
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range pods {
			if p.Spec.NodeName != "node-b" {
				return errorf("active pod %s on %q", p.Name, p.Spec.NodeName)
			}
			if isReady(&p) {
				ready++
			}
		}
		if len(pods) != 4 || ready != 4 {
			return errorf("%d active, %d ready", len(pods), ready)
		}
		return nil
	})

	// The agent comes back: Ready again, taint lifted.
	a.Start()
	eventually(t, 20*time.Second, "node-a back without taint", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rc := readyCondition(n); rc == nil || rc.Status != v1.ConditionTrue {
			return errorf("Ready = %+v", rc)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1.TaintNodeUnreachable || taint.Key == v1.TaintNodeNotReady {
				return errorf("taint %+v still there", taint)
			}
		}
		return nil
	})
}
