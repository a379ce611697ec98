package kubelet_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubelet/status"
)

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// markPodNotReady writes what the node lifecycle controller writes onto the pods of a node that stopped
// posting status (controlplane/controllers/nodelifecycle markPodsNotReady): Ready=False, reason
// NodeNotReady, a new transition time, through UpdateStatus with the admin client. Conditions in extra
// are added in the same write.
func (n *node) markPodNotReady(name string, extra ...v1.PodCondition) {
	n.t.Helper()
	ctx := context.Background()
	p, err := n.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	rc := podCondition(p, v1.PodReady)
	rc.Status, rc.LastTransitionTime = v1.ConditionFalse, metav1.Now()
	rc.Reason, rc.Message = "NodeNotReady", "node "+n.name+" stopped posting status"
	p.Status.Conditions = append(p.Status.Conditions, extra...)
	if _, err := n.client.CoreV1().Pods(testNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// TestStatusReconciledWithAPI: the node lifecycle controller's Ready=False written over a running, ready
// pod (what a node stall of 40 s+ leaves behind) is overwritten by the kubelet within one status
// reconcile period: Ready=True again with its old transition time, the container untouched (same ID,
// no restart, still ready), and a readiness-gate condition another writer added meanwhile kept.
func TestStatusReconciledWithAPI(t *testing.T) {
	n := newNode(t, false)
	n.create(n.demoPod("reconcile"))
	before := n.waitPod("reconcile", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	readySince := podCondition(before, v1.PodReady).LastTransitionTime

	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue}
	for round := 0; round < 2; round++ {
		if round == 0 {
			n.markPodNotReady("reconcile")
		} else {
			n.markPodNotReady("reconcile", gate)
		}
		marked := time.Now()
		p := n.waitPod("reconcile", status.ReconcilePeriod+2*time.Second, "Ready again", ready)
		t.Logf("round %d: Ready=True again %v after the NodeNotReady write", round, time.Since(marked).Round(time.Millisecond))
		if rc := podCondition(p, v1.PodReady); !rc.LastTransitionTime.Equal(&readySince) || rc.Reason != "" {
			t.Errorf("Ready condition after reconcile = %+v, want True since %v", rc, readySince)
		}
		oldCS, newCS := containerStatus(before, "demo"), containerStatus(p, "demo")
		if newCS.ContainerID != oldCS.ContainerID || newCS.RestartCount != 0 || !newCS.Ready || newCS.State.Running == nil {
			t.Errorf("container after reconcile: %+v, want %s running, ready, no restart", newCS, oldCS.ContainerID)
		}
		if round == 1 && condition(p, gate.Type) != v1.ConditionTrue {
			t.Errorf("condition %s of another writer lost: %+v", gate.Type, p.Status.Conditions)
		}
		if condition(p, v1.ContainersReady) != v1.ConditionTrue {
			t.Errorf("ContainersReady = %s after reconcile", condition(p, v1.ContainersReady))
		}
	}
}
