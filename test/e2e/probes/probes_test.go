package probes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// propagation is the slack for a probe result to reach the API: the kubelet's status write and this
// test's 100 ms poll.
const propagation = 3 * time.Second

func httpGet(path string, port intstr.IntOrString) v1.ProbeHandler {
	return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: port}}
}

func grpcCheck(port int32, service string) v1.ProbeHandler {
	h := v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: port}}
	if service != "" {
		h.GRPC.Service = &service
	}
	return h
}

func execCmd(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

// TestProbes runs every probe scenario as a parallel subtest against one node.
func TestProbes(t *testing.T) {
	n := startNode(t)
	t.Run("group", func(t *testing.T) {
		t.Run("ReadinessFlipsReadyBothWays", func(t *testing.T) { t.Parallel(); readinessFlips(t, n) })
		t.Run("LivenessFailureRestarts", func(t *testing.T) { t.Parallel(); livenessRestarts(t, n) })
		t.Run("StartupProbeDelaysLiveness", func(t *testing.T) { t.Parallel(); startupDelaysLiveness(t, n) })
		t.Run("StartupFailureRestarts", func(t *testing.T) { t.Parallel(); startupFailureRestarts(t, n) })
		t.Run("ExecProbe", func(t *testing.T) { t.Parallel(); execProbe(t, n) })
		t.Run("ExecProbeTimeout", func(t *testing.T) { t.Parallel(); execProbeTimeout(t, n) })
		t.Run("GRPCProbe", func(t *testing.T) { t.Parallel(); grpcProbe(t, n) })
		t.Run("BadSpecsRejected", func(t *testing.T) { t.Parallel(); badSpecsRejected(t, n) })
	})
}

// readinessFlips: /readyz failing takes the pod out of Ready within period×failureThreshold (+1 period)
// and back within period×successThreshold (+1 period), and its Service endpoint with it; readiness
// never restarts the container.
func readinessFlips(t *testing.T, n *node) {
	const period, failures, successes = 2, 2, 1
	p := n.demoPod("readiness")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: httpGet("/readyz", intstr.FromString("http")),
		PeriodSeconds: period, FailureThreshold: failures, SuccessThreshold: successes}
	// A tcpSocket liveness probe on the named port keeps passing throughout.
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}, PeriodSeconds: 1}
	n.create(t, p)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "readiness", Namespace: ns}, Spec: v1.ServiceSpec{
		Selector: map[string]string{"app": p.Name}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := n.client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := n.wait(t, p.Name, 90*time.Second, "Ready", isReady(true))
	n.waitEndpoint(t, svc.Name, p.Name, true, propagation)

	n.exec(t, got, "touch", "/tmp/readyz-fail")
	start := time.Now()
	limit := time.Duration(period*failures+period)*time.Second + propagation
	n.wait(t, p.Name, limit, "not Ready after /readyz failed", isReady(false))
	t.Logf("not Ready %v after /readyz failed (period %ds × failureThreshold %d, +1 period = %ds)", time.Since(start).Round(100*time.Millisecond), period, failures, period*failures+period)
	n.waitEndpoint(t, svc.Name, p.Name, false, propagation)
	n.waitEvent(t, p.Name, "Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503", 10*time.Second)

	n.exec(t, got, "rm", "/tmp/readyz-fail")
	start = time.Now()
	limit = time.Duration(period*successes+period)*time.Second + propagation
	back := n.wait(t, p.Name, limit, "Ready again after /readyz recovered", isReady(true))
	t.Logf("Ready again %v after /readyz recovered", time.Since(start).Round(100*time.Millisecond))
	n.waitEndpoint(t, svc.Name, p.Name, true, propagation)
	if cs := demo(back); cs.RestartCount != 0 || cs.ContainerID != demo(got).ContainerID {
		t.Fatalf("readiness restarted the container: restartCount=%d id %s -> %s", cs.RestartCount, demo(got).ContainerID, cs.ContainerID)
	}
}

// livenessRestarts: a failing /healthz restarts the container (Unhealthy and Killing events), the new
// instance is probed afresh and left alone while healthy, and each further failure restarts it again.
func livenessRestarts(t *testing.T, n *node) {
	p := n.demoPod("liveness")
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: httpGet("/healthz", intstr.FromInt32(8080)),
		PeriodSeconds: 1, FailureThreshold: 2}
	n.create(t, p)
	first := n.wait(t, p.Name, 90*time.Second, "running", running)
	firstID := demo(first).ContainerID

	n.exec(t, first, "touch", "/tmp/healthz-fail")
	second := n.wait(t, p.Name, 30*time.Second, "a restart after /healthz failed", func(p *v1.Pod) bool {
		cs := demo(p)
		return running(p) && cs.RestartCount == 1 && cs.ContainerID != firstID
	})
	n.waitEvent(t, p.Name, "Unhealthy: Liveness probe failed: HTTP probe failed with statuscode: 503", 10*time.Second)
	kill := n.waitEvent(t, p.Name, "Killing: ", 10*time.Second)
	if want := "Killing: Container demo failed liveness probe, will be restarted"; kill != want {
		t.Fatalf("Killing event %q, want upstream's %q", kill, want)
	}
	// The new instance has no healthz-fail file (a fresh rootfs): it stays up.
	time.Sleep(4 * time.Second)
	still := n.wait(t, p.Name, 5*time.Second, "still running", running)
	if cs := demo(still); cs.RestartCount != 1 || cs.ContainerID != demo(second).ContainerID {
		t.Fatalf("healthy restarted container was restarted again: restartCount=%d", cs.RestartCount)
	}
	n.exec(t, second, "touch", "/tmp/healthz-fail")
	n.wait(t, p.Name, 30*time.Second, "a second restart", func(p *v1.Pod) bool {
		return running(p) && demo(p).RestartCount == 2
	})
}

// startupDelaysLiveness: a container that listens only after 8 s survives a strict liveness probe
// because the startup probe holds it back; the same container without a startup probe is killed.
func startupDelaysLiveness(t *testing.T, n *node) {
	const slow = 8 * time.Second
	liveness := &v1.Probe{ProbeHandler: httpGet("/healthz", intstr.FromString("http")), PeriodSeconds: 1, FailureThreshold: 1}
	gated := n.demoPod("startup-gated", "--slow-start="+slow.String())
	gated.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: httpGet("/healthz", intstr.FromString("http")), PeriodSeconds: 1, FailureThreshold: 30}
	gated.Spec.Containers[0].LivenessProbe = liveness.DeepCopy()
	ungated := n.demoPod("startup-none", "--slow-start="+slow.String())
	ungated.Spec.Containers[0].LivenessProbe = liveness.DeepCopy()
	n.create(t, gated)
	n.create(t, ungated)

	p := n.wait(t, gated.Name, 90*time.Second, "running", running)
	if cs := demo(p); cs.Started != nil && *cs.Started {
		t.Fatalf("started before the startup probe passed: %+v", cs)
	}
	p = n.wait(t, gated.Name, slow+30*time.Second, "started and Ready", func(p *v1.Pod) bool {
		cs := demo(p)
		return cs != nil && cs.Started != nil && *cs.Started && isReady(true)(p)
	})
	cs := demo(p)
	if cs.RestartCount != 0 {
		t.Fatalf("liveness restarted a container whose startup probe had not passed: restartCount=%d", cs.RestartCount)
	}
	if took := time.Since(cs.State.Running.StartedAt.Time); took < slow-time.Second {
		t.Fatalf("Started %v after the container started, before it listened (%v)", took, slow)
	}
	n.wait(t, ungated.Name, 60*time.Second, "a liveness restart without a startup probe", func(p *v1.Pod) bool {
		cs := demo(p)
		return cs != nil && cs.RestartCount >= 1
	})
	// Liveness keeps running on the gated pod after start-up: still no restart.
	if cs := demo(n.wait(t, gated.Name, 5*time.Second, "running", running)); cs.RestartCount != 0 {
		t.Fatalf("gated pod restarted: %d", cs.RestartCount)
	}
}

// startupFailureRestarts: a startup probe failing past its threshold restarts the container.
func startupFailureRestarts(t *testing.T, n *node) {
	p := n.demoPod("startup-fail", "--slow-start=10m")
	p.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1, FailureThreshold: 3}
	n.create(t, p)
	n.wait(t, p.Name, 90*time.Second, "a restart after the startup probe failed", func(p *v1.Pod) bool {
		cs := demo(p)
		return cs != nil && cs.RestartCount >= 1 && (cs.Started == nil || !*cs.Started) && !isReady(true)(p)
	})
	n.waitEvent(t, p.Name, "Unhealthy: Startup probe failed: ", 10*time.Second)
	kill := n.waitEvent(t, p.Name, "Killing: ", 10*time.Second)
	if want := "Killing: Container demo failed startup probe, will be restarted"; kill != want {
		t.Fatalf("Killing event %q, want upstream's %q", kill, want)
	}
}

// execProbe: readiness `cat /tmp/healthy` through CRI ExecSync follows the file.
func execProbe(t *testing.T, n *node) {
	p := n.demoPod("exec")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: execCmd("cat", "/tmp/healthy"), PeriodSeconds: 1, FailureThreshold: 1}
	n.create(t, p)
	got := n.wait(t, p.Name, 90*time.Second, "running", running)
	// The file is missing: the probe fails with cat's own message and the pod is not Ready.
	ev := n.waitEvent(t, p.Name, "Unhealthy: Readiness probe failed: ", 20*time.Second)
	if !strings.Contains(ev, "/tmp/healthy") {
		t.Fatalf("exec failure event lacks the command output: %q", ev)
	}
	n.wait(t, p.Name, 5*time.Second, "not Ready", isReady(false))
	n.exec(t, got, "touch", "/tmp/healthy")
	n.wait(t, p.Name, 2*time.Second+propagation, "Ready once /tmp/healthy exists", isReady(true))
	n.exec(t, got, "rm", "/tmp/healthy")
	n.wait(t, p.Name, 2*time.Second+propagation, "not Ready once /tmp/healthy is gone", isReady(false))
}

// execProbeTimeout: an exec probe outliving timeoutSeconds fails as timed out (the runtime kills it).
func execProbeTimeout(t *testing.T, n *node) {
	p := n.demoPod("exec-timeout")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: execCmd("sleep", "30"), PeriodSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 1}
	n.create(t, p)
	n.wait(t, p.Name, 90*time.Second, "running", running)
	n.waitEvent(t, p.Name, `Unhealthy: Readiness probe failed: command "sleep 30" timed out`, 30*time.Second)
	n.wait(t, p.Name, 5*time.Second, "not Ready", isReady(false))
}

// grpcProbe: grpc.health.v1 readiness on service "readiness" follows /tmp/readyz-fail, and an overall
// health liveness probe keeps passing.
func grpcProbe(t *testing.T, n *node) {
	p := n.demoPod("grpc")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: grpcCheck(9090, "readiness"), PeriodSeconds: 1, FailureThreshold: 1}
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: grpcCheck(9090, ""), PeriodSeconds: 1, FailureThreshold: 2}
	n.create(t, p)
	got := n.wait(t, p.Name, 90*time.Second, "Ready", isReady(true))
	n.exec(t, got, "touch", "/tmp/readyz-fail")
	n.wait(t, p.Name, 2*time.Second+propagation, "not Ready after the readiness service turned NOT_SERVING", isReady(false))
	n.waitEvent(t, p.Name, `Unhealthy: Readiness probe failed: service unhealthy (responded with "NOT_SERVING")`, 10*time.Second)
	n.exec(t, got, "rm", "/tmp/readyz-fail")
	back := n.wait(t, p.Name, 2*time.Second+propagation, "Ready again", isReady(true))
	if cs := demo(back); cs.RestartCount != 0 {
		t.Fatalf("gRPC liveness restarted a healthy container: %d", cs.RestartCount)
	}
}

// badSpecsRejected: the API server's validation refuses bad probes with the field path, and nothing
// reaches the node.
func badSpecsRejected(t *testing.T, n *node) {
	for i, tc := range []struct {
		name  string
		set   func(c *v1.Container)
		field string
	}{
		{"no handler", func(c *v1.Container) { c.ReadinessProbe = &v1.Probe{} }, "spec.containers[0].readinessProbe"},
		{"two handlers", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080)}, TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
		}, "spec.containers[0].livenessProbe"},
		{"http port out of range", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: httpGet("/", intstr.FromInt32(70000))}
		}, "spec.containers[0].livenessProbe.httpGet.port"},
		{"tcp port zero", func(c *v1.Container) {
			c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(0)}}}
		}, "spec.containers[0].startupProbe.tcpSocket.port"},
		{"grpc port out of range", func(c *v1.Container) { c.ReadinessProbe = &v1.Probe{ProbeHandler: grpcCheck(65536, "")} }, "spec.containers[0].readinessProbe.grpc.port"},
		{"negative failureThreshold", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: httpGet("/healthz", intstr.FromInt32(8080)), FailureThreshold: -1}
		}, "spec.containers[0].livenessProbe.failureThreshold"},
		{"negative successThreshold", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: httpGet("/readyz", intstr.FromInt32(8080)), SuccessThreshold: -2}
		}, "spec.containers[0].readinessProbe.successThreshold"},
		{"negative periodSeconds", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: grpcCheck(9090, ""), PeriodSeconds: -1}
		}, "spec.containers[0].readinessProbe.periodSeconds"},
		{"negative initialDelaySeconds", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: execCmd("true"), InitialDelaySeconds: -5}
		}, "spec.containers[0].livenessProbe.initialDelaySeconds"},
		{"liveness successThreshold above 1", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: execCmd("true"), SuccessThreshold: 2}
		}, "spec.containers[0].livenessProbe.successThreshold"},
	} {
		p := n.demoPod(fmt.Sprintf("bad-%d", i))
		tc.set(&p.Spec.Containers[0])
		_, err := n.client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: create answered %v, want 422 Invalid", tc.name, err)
			continue
		}
		var fields []string
		if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
			for _, c := range st.Status().Details.Causes {
				fields = append(fields, c.Field)
			}
		}
		found := false
		for _, f := range fields {
			found = found || f == tc.field
		}
		if !found {
			t.Errorf("%s: causes name fields %q, want %q (%v)", tc.name, fields, tc.field, err)
		}
		if _, err := n.client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: rejected pod exists (%v)", tc.name, err)
		}
	}
	// Nothing ran: no sandbox for any rejected pod ever reached containerd.
	time.Sleep(2 * time.Second)
	resp, err := n.rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.Items {
		if strings.HasPrefix(s.GetMetadata().GetName(), "bad-") {
			t.Errorf("sandbox %s runs for a rejected pod", s.GetMetadata().GetName())
		}
	}
}
