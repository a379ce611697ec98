package kubelet_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/images/bundled"
)

func terminatedState(p *v1.Pod, name string) *v1.ContainerStateTerminated {
	if cs := containerStatus(p, name); cs != nil {
		return cs.State.Terminated
	}
	return nil
}

func waitingReason(p *v1.Pod, name string) string {
	if cs := containerStatus(p, name); cs != nil && cs.State.Waiting != nil {
		return cs.State.Waiting.Reason
	}
	return ""
}

// TestRestartPolicies: exit codes and reasons per restartPolicy, and CrashLoopBackOff gaps that double;
// on the same node, termination messages (terminationCases) and pod sysctls (sysctlCases).
func TestRestartPolicies(t *testing.T) {
	n := newNode(t, false)
	terminationCases(t, n)
	sysctlCases(t, n)

	t.Run("NeverFails", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("never", "--exit-after=1s", "--exit-code=3")
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		n.create(pod)
		p := n.waitPod("never", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		term := terminatedState(p, "demo")
		if term == nil || term.ExitCode != 3 || term.Reason != "Error" {
			t.Fatalf("terminated state %+v, want exit code 3 reason Error", term)
		}
		if cs := containerStatus(p, "demo"); cs.RestartCount != 0 {
			t.Errorf("restartCount %d with restartPolicy Never", cs.RestartCount)
		}
		if condition(p, v1.PodReady) != v1.ConditionFalse {
			t.Errorf("a Failed pod must not be Ready")
		}
	})

	t.Run("OnFailureSucceeds", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("onfailure", "--exit-after=1s", "--exit-code=0")
		pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
		n.create(pod)
		p := n.waitPod("onfailure", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
		term := terminatedState(p, "demo")
		if term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Fatalf("terminated state %+v, want exit code 0 reason Completed", term)
		}
		// A Succeeded pod is not restarted: the container stays exited.
		time.Sleep(3 * time.Second)
		if cs := n.podContainers(string(p.UID)); len(cs) != 1 {
			t.Fatalf("%d containers after success, want 1", len(cs))
		}
	})

	t.Run("AlwaysCrashLoopBackOff", func(t *testing.T) {
		t.Parallel()
		n.create(n.demoPod("crash", "--exit-after=1s", "--exit-code=3", "--termination-message=crashed"))
		// Record each instance's start time and the finish time of the one before it.
		starts := map[int32]time.Time{}
		finishes := map[int32]time.Time{}
		sawBackOff := false
		p := n.waitPod("crash", 120*time.Second, "restartCount 3", func(p *v1.Pod) bool {
			cs := containerStatus(p, "demo")
			if cs == nil {
				return false
			}
			if cs.State.Running != nil {
				starts[cs.RestartCount] = cs.State.Running.StartedAt.Time
			}
			// lastState is the previous instance while one runs, the one that just died while waiting.
			if lt := cs.LastTerminationState.Terminated; lt != nil {
				if cs.State.Running != nil && cs.RestartCount > 0 {
					finishes[cs.RestartCount-1] = lt.FinishedAt.Time
				} else if cs.State.Waiting != nil {
					finishes[cs.RestartCount] = lt.FinishedAt.Time
				}
				if lt.ExitCode != 3 || lt.Reason != "Error" || lt.Message != "crashed" {
					t.Errorf("lastState %+v, want exit 3 reason Error message crashed (its termination message)", lt)
				}
			}
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
			return cs.RestartCount >= 3 && cs.State.Running != nil
		})
		if !sawBackOff {
			t.Errorf("never saw waiting reason CrashLoopBackOff")
		}
		gap := func(i int32) time.Duration { return starts[i].Sub(finishes[i-1]) }
		for i := int32(1); i <= 3; i++ {
			if starts[i].IsZero() || finishes[i-1].IsZero() {
				t.Fatalf("missing observations: starts=%v finishes=%v", starts, finishes)
			}
		}
		t.Logf("restart gaps: %v %v %v", gap(1), gap(2), gap(3))
		// Back-off: first restart at once, then 10 s, then 20 s (second resolution in the API).
		if gap(1) > 5*time.Second || gap(2) < 9*time.Second || gap(3) < 19*time.Second || gap(3) < gap(2)+8*time.Second {
			t.Errorf("restart gaps %v, %v, %v: want ~0, >=10s, >=20s", gap(1), gap(2), gap(3))
		}
		if got := containerStatus(p, "demo").RestartCount; got < 3 {
			t.Errorf("restartCount %d", got)
		}
		if !slices.Contains(n.events("crash"), "BackOff") {
			t.Errorf("no BackOff event; events: %v", n.events("crash"))
		}
		// Dead instances are garbage-collected down to the newest one (plus the running one).
		deadline := time.Now().Add(15 * time.Second)
		for len(n.podContainers(string(p.UID))) > 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%d containers kept, want at most 2 (running + newest dead)", len(n.podContainers(string(p.UID))))
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// TestStartErrors: waiting reasons for a missing image and a missing configMap key.
func TestStartErrors(t *testing.T) {
	n := newNode(t, false)
	t.Run("ImagePull", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("noimage")
		pod.Spec.Containers[0].Image = "nodekit.local/does-not-exist:v1"
		n.create(pod)
		n.waitPod("noimage", 60*time.Second, "ErrImagePull", func(p *v1.Pod) bool { return waitingReason(p, "demo") == "ErrImagePull" })
		p := n.waitPod("noimage", 60*time.Second, "ImagePullBackOff", func(p *v1.Pod) bool { return waitingReason(p, "demo") == "ImagePullBackOff" })
		if p.Status.Phase != v1.PodPending {
			t.Errorf("phase %s, want Pending", p.Status.Phase)
		}
		if ev := n.events("noimage"); !slices.Contains(ev, "Failed") || !slices.Contains(ev, "BackOff") {
			t.Errorf("events %v, want Failed and BackOff", ev)
		}
	})
	t.Run("CreateContainerConfigError", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("nocfg")
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Key: "k"}}})
		n.create(pod)
		p := n.waitPod("nocfg", 60*time.Second, "CreateContainerConfigError", func(p *v1.Pod) bool {
			return waitingReason(p, "demo") == "CreateContainerConfigError"
		})
		if msg := containerStatus(p, "demo").State.Waiting.Message; !strings.Contains(msg, `"missing"`) {
			t.Errorf("message %q does not name the configMap", msg)
		}
	})
}

// TestInitAndSidecarContainers: init containers run in order before the app; a restartable init
// (sidecar) container keeps running next to it.
func TestInitAndSidecarContainers(t *testing.T) {
	n := newNode(t, false)
	pod := n.demoPod("init")
	always := v1.ContainerRestartPolicyAlways
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.InitContainers = []v1.Container{
		{Name: "first", Image: bundled.DemoServerV1, Command: []string{"touch", "/work/first"}, VolumeMounts: mount},
		// Fails (and is retried) unless "first" ran before it.
		{Name: "second", Image: bundled.DemoServerV1, Command: []string{"ls", "/work/first"}, VolumeMounts: mount},
		{Name: "sidecar", Image: bundled.DemoServerV1, RestartPolicy: &always, Args: []string{"--port=8090", "--grpc-port=0", "--udp-port=0"}},
	}
	pod.Spec.Containers[0].VolumeMounts = mount
	n.create(pod)
	p := n.waitPod("init", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	if condition(p, v1.PodInitialized) != v1.ConditionTrue {
		t.Errorf("Initialized is not True")
	}
	st := map[string]v1.ContainerStatus{}
	for _, cs := range p.Status.InitContainerStatuses {
		st[cs.Name] = cs
	}
	for _, name := range []string{"first", "second"} {
		term := st[name].State.Terminated
		if term == nil || term.ExitCode != 0 || term.Reason != "Completed" || st[name].RestartCount != 0 {
			t.Errorf("init container %s: %+v, want Completed once", name, st[name])
		}
	}
	if st["second"].State.Terminated.StartedAt.Before(&st["first"].State.Terminated.FinishedAt) {
		t.Errorf("second started %v before first finished %v", st["second"].State.Terminated.StartedAt, st["first"].State.Terminated.FinishedAt)
	}
	if st["sidecar"].State.Running == nil {
		t.Errorf("sidecar is not running: %+v", st["sidecar"])
	}
	if out := n.exec(containerStatus(p, "demo").ContainerID, "ls", "/work"); !strings.Contains(out, "first") {
		t.Errorf("app container does not see the init container's file: %q", out)
	}
	if body := httpGet(t, "http://"+p.Status.PodIP+":8090/healthz"); body != "ok" {
		t.Errorf("sidecar answered %q", body)
	}
}

// TestGracefulTermination: deletion runs the preStop hook, sends SIGTERM, waits for the process (within
// the grace period, so it exits 0 on its own), and then completes the deletion of the API object.
func TestGracefulTermination(t *testing.T) {
	n := newNode(t, false)
	hostDir := t.TempDir()
	pod := n.demoPod("graceful", "--term-delay=3s")
	grace := int64(20)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	c := &pod.Spec.Containers[0]
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/host"}}
	c.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"touch", "/host/poststart"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"touch", "/host/prestop"}}},
	}
	n.create(pod)
	p := n.waitPod("graceful", 60*time.Second, "Running", running)
	if _, err := os.Stat(filepath.Join(hostDir, "poststart")); err != nil {
		t.Errorf("postStart hook did not run: %v", err)
	}
	logFile := filepath.Join(n.logDir, "default_graceful_"+string(p.UID), "demo", "0.log")

	w, err := n.client.CoreV1().Pods(testNS).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	n.deleteGracefully("graceful", grace)
	sawSIGTERM := false
	var last *v1.Pod
	timeout := time.After(60 * time.Second)
loop:
	for {
		select {
		case ev := <-w.ResultChan():
			pp, ok := ev.Object.(*v1.Pod)
			if !ok || pp.Name != "graceful" {
				continue
			}
			if ev.Type == watch.Deleted {
				break loop
			}
			last = pp
		case <-time.After(100 * time.Millisecond):
		case <-timeout:
			t.Fatalf("pod not deleted within 60s")
		}
		if !sawSIGTERM {
			if b, err := os.ReadFile(logFile); err == nil && strings.Contains(string(b), "received SIGTERM") {
				sawSIGTERM = true
			}
		}
	}
	took := time.Since(start)
	if !sawSIGTERM {
		t.Errorf("the container never logged \"received SIGTERM\" in %s", logFile)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "prestop")); err != nil {
		t.Errorf("preStop hook did not run: %v", err)
	}
	if took < 3*time.Second || took > 15*time.Second {
		t.Errorf("deletion took %v; want the 3 s term delay honoured and no wait for the full 20 s grace", took)
	}
	if term := terminatedState(last, "demo"); term == nil || term.ExitCode != 0 {
		t.Errorf("last status before deletion: %+v; want the container terminated by itself with exit 0", last.Status.ContainerStatuses)
	}
	if ev := n.events("graceful"); !slices.Contains(ev, "Killing") {
		t.Errorf("no Killing event: %v", ev)
	}
}
