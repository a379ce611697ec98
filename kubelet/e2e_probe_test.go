package kubelet_test

import (
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/kubelet/prober/results"
)

// scriptedProber is a ProbeManager whose results the test dictates; it stands in for the probes
// package to exercise the kubelet's side of the hook on real containers.
type scriptedProber struct {
	mu      sync.Mutex
	ready   bool
	added   map[types.UID]bool
	removed map[types.UID]bool
	results chan results.Update
}

func newScriptedProber() *scriptedProber {
	return &scriptedProber{added: map[types.UID]bool{}, removed: map[types.UID]bool{}, results: make(chan results.Update, 10)}
}

func (p *scriptedProber) AddPod(pod *v1.Pod) { p.mu.Lock(); p.added[pod.UID] = true; p.mu.Unlock() }
func (p *scriptedProber) RemovePod(pod *v1.Pod) {
	p.mu.Lock()
	p.removed[pod.UID] = true
	p.mu.Unlock()
}
func (p *scriptedProber) Results() <-chan results.Update {
	return p.results
}
func (p *scriptedProber) UpdatePodStatus(_ *v1.Pod, s *v1.PodStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range s.ContainerStatuses {
		running := s.ContainerStatuses[i].State.Running != nil
		s.ContainerStatuses[i].Started = &running
		s.ContainerStatuses[i].Ready = running && p.ready
	}
}

func (p *scriptedProber) setReady(r bool) { p.mu.Lock(); p.ready = r; p.mu.Unlock() }

// TestProbeHook: readiness reported by the ProbeManager drives the Ready condition both ways; a
// liveness failure makes the pod worker kill and restart that container instance with the liveness
// probe's own terminationGracePeriodSeconds (3 s) instead of the pod's (60 s, which the container, slow
// to leave after SIGTERM, would use up), and upstream's Killing event.
func TestProbeHook(t *testing.T) {
	n := newNode(t, true)
	pr := newScriptedProber()
	n.prober = pr
	n.start()
	pod := n.demoPod("probed", "--term-delay=60s")
	podGrace, probeGrace := int64(60), int64(3)
	pod.Spec.TerminationGracePeriodSeconds = &podGrace
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:                  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		TerminationGracePeriodSeconds: &probeGrace,
	}
	n.create(pod)
	p := n.waitPod("probed", 60*time.Second, "Running", running)
	if ready(p) {
		t.Fatalf("pod Ready while the prober says not ready")
	}
	pr.setReady(true)
	pr.results <- results.Update{PodUID: p.UID, ContainerName: "demo", Probe: results.Readiness, Result: results.Success}
	p = n.waitPod("probed", 10*time.Second, "Ready", ready)
	pr.setReady(false)
	pr.results <- results.Update{PodUID: p.UID, ContainerName: "demo", Probe: results.Readiness, Result: results.Failure}
	n.waitPod("probed", 10*time.Second, "not Ready", func(p *v1.Pod) bool { return !ready(p) })

	old := containerStatus(p, "demo").ContainerID
	pr.results <- results.Update{PodUID: p.UID, ContainerName: "demo", ContainerID: old, Probe: results.Liveness,
		Result: results.Failure, Message: "HTTP probe failed with statuscode: 500"}
	// Within the probe's grace period (+ restart), well before the pod's 60 s.
	p = n.waitPod("probed", 30*time.Second, "restarted after the liveness failure", func(p *v1.Pod) bool {
		cs := containerStatus(p, "demo")
		return cs.RestartCount == 1 && cs.State.Running != nil && cs.ContainerID != old
	})
	if lt := containerStatus(p, "demo").LastTerminationState.Terminated; lt == nil || lt.ContainerID != old {
		t.Errorf("lastState %+v, want the killed instance %s", lt, old)
	} else if lt.ExitCode != 137 {
		t.Errorf("killed instance exit code %d, want 137 (SIGKILL after the probe's 3 s grace period)", lt.ExitCode)
	}
	killing := false
	evs, _ := n.client.CoreV1().Events(testNS).List(t.Context(), metav1.ListOptions{})
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == "probed" && e.Reason == "Killing" && e.Message == "Container demo failed liveness probe, will be restarted" {
			killing = true
		}
	}
	if !killing {
		t.Errorf("no Killing event \"Container demo failed liveness probe, will be restarted\"; events %v", n.events("probed"))
	}
	pr.mu.Lock()
	added := pr.added[p.UID]
	pr.mu.Unlock()
	if !added {
		t.Errorf("AddPod was not called")
	}
	n.deleteGracefully("probed", 2)
	n.waitGone("probed", 30*time.Second)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.removed[p.UID] {
		t.Errorf("RemovePod was not called after termination")
	}
}
