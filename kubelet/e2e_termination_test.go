package kubelet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// terminationCases are the termination-message checks of upstream's "Container Runtime blackbox test
// ... on terminated container" specs (test/e2e/common/node/runtime.go), run as subtests of
// TestRestartPolicies on its node: the file's content (also as a non-root user at a non-default path,
// with FallbackToLogsOnError and success), the log's tail with FallbackToLogsOnError on failure, and no
// message with FallbackToLogsOnError on success without a file.
func terminationCases(t *testing.T, n *node) {
	finished := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed }
	run := func(t *testing.T, name string, edit func(c *v1.Container), args ...string) *v1.ContainerStateTerminated {
		t.Helper()
		pod := n.demoPod(name, args...)
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		edit(&pod.Spec.Containers[0])
		n.create(pod)
		p := n.waitPod(name, 60*time.Second, "finished", finished)
		term := terminatedState(p, "demo")
		if term == nil {
			t.Fatalf("no terminated state: %+v", p.Status.ContainerStatuses)
		}
		return term
	}
	t.Run("TerminationMessageFile", func(t *testing.T) {
		t.Parallel()
		term := run(t, "tm-file", func(*v1.Container) {}, "--termination-message=DONE", "--exit-after=1s", "--exit-code=0")
		if term.ExitCode != 0 || term.Message != "DONE" {
			t.Errorf("terminated %+v, want exit 0 and message DONE", term)
		}
	})
	t.Run("TerminationMessageNonRootCustomPath", func(t *testing.T) {
		t.Parallel()
		uid := int64(1000)
		term := run(t, "tm-nonroot", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{RunAsUser: &uid}
			c.TerminationMessagePath = "/dev/termination-custom-log"
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
		}, "--termination-message=OK", "--termination-message-path=/dev/termination-custom-log", "--exit-after=1s", "--exit-code=0")
		if term.ExitCode != 0 || term.Message != "OK" {
			t.Errorf("terminated %+v, want exit 0 and message OK (from the file, written as uid 1000)", term)
		}
		// The host file: <root>/pods/<uid>/containers/<container>/<id>, mode 0666.
		p, err := n.client.CoreV1().Pods(testNS).Get(context.Background(), "tm-nonroot", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(n.rootDir, "pods", string(p.UID), "containers", "demo", "*"))
		if len(files) != 1 {
			t.Fatalf("termination message files %v, want 1", files)
		}
		if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o666 {
			t.Errorf("termination message file %s: %v %v, want mode 0666", files[0], fi.Mode(), err)
		}
		n.deleteGracefully("tm-nonroot", 0)
		n.waitGone("tm-nonroot", 60*time.Second)
		await(t, 30*time.Second, "pod directory removed", func() bool {
			_, err := os.Stat(filepath.Join(n.rootDir, "pods", string(p.UID)))
			return os.IsNotExist(err)
		})
	})
	t.Run("FallbackToLogsOnError", func(t *testing.T) {
		t.Parallel()
		term := run(t, "tm-logs", func(c *v1.Container) {
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
		}, "--exit-after=1s", "--exit-code=2")
		if term.ExitCode != 2 || !strings.HasSuffix(term.Message, "exiting after 1s with code 2 (--exit-after)\n") {
			t.Errorf("terminated %+v, want exit 2 and the log's last line as message", term)
		}
	})
	t.Run("FallbackToLogsOnSuccessIsEmpty", func(t *testing.T) {
		t.Parallel()
		term := run(t, "tm-empty", func(c *v1.Container) {
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
		}, "--exit-after=1s", "--exit-code=0")
		if term.ExitCode != 0 || term.Message != "" {
			t.Errorf("terminated %+v, want exit 0 and no message", term)
		}
	})
}

// sysctlCases are the checks of upstream's "Sysctls [LinuxOnly] [NodeConformance]" specs, run on
// TestRestartPolicies' node: a safe sysctl (kernel.shm_rmid_forced, of the pod's IPC namespace) is set
// in the sandbox and seen by the container; an unsafe one the node does not allow makes the kubelet
// reject the pod (Failed, reason SysctlForbidden) without creating anything.
func sysctlCases(t *testing.T, n *node) {
	t.Run("SafeSysctl", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("sysctl-safe")
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
		pod.Spec.Containers[0].Command = []string{"/bin/cat", "/proc/sys/kernel/shm_rmid_forced"}
		n.create(pod)
		p := n.waitPod("sysctl-safe", 60*time.Second, "finished", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		})
		if p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("phase %s, want Succeeded: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		b, err := os.ReadFile(filepath.Join(n.logDir, "default_sysctl-safe_"+string(p.UID), "demo", "0.log"))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
			t.Errorf("log %q, want the one line 1", b)
		}
	})
	t.Run("UnsafeSysctlForbidden", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("sysctl-unsafe")
		pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000000000"}}}
		n.create(pod)
		p := n.waitPod("sysctl-unsafe", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "SysctlForbidden" || p.Status.Message != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
			t.Errorf("reason %q message %q, want SysctlForbidden", p.Status.Reason, p.Status.Message)
		}
		if cs := n.podContainers(string(p.UID)); len(cs) != 0 {
			t.Errorf("%d containers created for a rejected pod", len(cs))
		}
	})
	t.Run("ActiveDeadlineExceeded", func(t *testing.T) {
		t.Parallel()
		pod := n.demoPod("deadline")
		n.create(pod)
		p := n.waitPod("deadline", 60*time.Second, "Running", running)
		// The deadline is set on the running pod, as the conformance spec "should allow
		// activeDeadlineSeconds to be updated" does.
		ads := int64(2)
		p.Spec.ActiveDeadlineSeconds = &ads
		if _, err := n.client.CoreV1().Pods(testNS).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		p = n.waitPod("deadline", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("reason %q message %q, want DeadlineExceeded", p.Status.Reason, p.Status.Message)
		}
		if st := p.Status.StartTime; st == nil || time.Since(st.Time) < 2*time.Second {
			t.Errorf("failed before its deadline: startTime %v", st)
		}
		deadline := time.Now().Add(30 * time.Second)
		runningCount := func() (k int) {
			for _, c := range n.podContainers(string(p.UID)) {
				if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					k++
				}
			}
			return k
		}
		for runningCount() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("containers still running 30 s after the deadline")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
