package probes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestTerminatingPodRunsOnlyReadiness: while a deleted pod's container finishes its grace period,
// liveness is no longer probed (a failing /healthz produces no Unhealthy event and no restart) and
// readiness still is (the demo server's /readyz fails after SIGTERM, and the pod turns not Ready).
//
// It needs two kubelet changes (reported to the kubelet's owner) and is skipped until they land:
// SyncTerminatingPod must generate the pod's status (which calls ProbeManager.UpdatePodStatus with the
// deleted pod) before KillPod, as upstream does, so the probe manager learns of the deletion; and a
// readiness result (results.Update) must reach the API while the pod worker waits in KillPod (upstream
// writes it through the status manager, SetContainerReadiness, not through a pod sync).
func TestTerminatingPodRunsOnlyReadiness(t *testing.T) {
	n := startNode(t)
	p := n.demoPod("terminating", "--term-delay=20s")
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: httpGet("/readyz", intstr.FromString("http")), PeriodSeconds: 1, FailureThreshold: 1}
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: httpGet("/healthz", intstr.FromString("http")), PeriodSeconds: 1, FailureThreshold: 1}
	n.create(t, p)
	got := n.wait(t, p.Name, 90*time.Second, "Ready", isReady(true))
	if err := n.client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n.exec(t, got, "touch", "/tmp/healthz-fail")
	n.wait(t, p.Name, 10*time.Second, "not Ready while terminating", isReady(false))
	t.Logf("not Ready %v after the delete", time.Since(start).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second)
	for _, e := range n.events(t, p.Name) {
		if strings.HasPrefix(e, "Unhealthy: Liveness") || (strings.HasPrefix(e, "Killing: ") && strings.Contains(e, "failed liveness probe")) {
			t.Fatalf("liveness probed a terminating pod: %q", e)
		}
	}
}
