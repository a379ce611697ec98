package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/images/bundled"
)

// testDebug drives `kubectl debug` against a real node: an ephemeral container added to web
// (pods/ephemeralcontainers) with --target=web runs in web's process namespace (its PID 1 is web's
// /demo-server), reaches terminated with exit code 0 in status.ephemeralContainerStatuses, and its
// output comes back through `kubectl logs -c`; `kubectl debug -i` streams stdin to one (its `cat` echoes a line); removing it, changing it or adding one with ports is
// refused with the field path, as is adding one through the pod itself; `kubectl debug node/<node>`
// runs a hostPID/hostNetwork pod that reads the host's root file system at /host.
func testDebug(t *testing.T, admin kubernetes.Interface, kubeconfig, nodeName string, web *v1.Pod) {
	kubectl := kubectlPath()
	if kubectl == "" {
		t.Skip("no kubectl: neither the conformance cache's nor one on PATH")
	}
	ctx := context.Background()
	run := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	pods := admin.CoreV1().Pods(web.Namespace)

	if out, err := run("-n", web.Namespace, "debug", web.Name, "--image="+bundled.DemoServerV1, "--image-pull-policy=Never",
		"--target=web", "--container=debugger", "--", "cat", "/proc/1/cmdline"); err != nil {
		t.Fatalf("kubectl debug: %v\n%s", err, out)
	}
	var debugger v1.ContainerStatus
	waitFor(t, 60*time.Second, "debugger terminated", func() (bool, string) {
		p, err := pods.Get(ctx, web.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cs := range p.Status.EphemeralContainerStatuses {
			if cs.Name == "debugger" {
				debugger = cs
				return cs.State.Terminated != nil, fmt.Sprintf("%+v", cs.State)
			}
		}
		return false, fmt.Sprintf("no status of debugger: %+v", p.Status.EphemeralContainerStatuses)
	})
	if tm := debugger.State.Terminated; tm.ExitCode != 0 || debugger.RestartCount != 0 || debugger.ContainerID == "" {
		t.Errorf("debugger status: exit %d, restarts %d, id %q; want 0, 0 and an ID", tm.ExitCode, debugger.RestartCount, debugger.ContainerID)
	}
	out, err := run("-n", web.Namespace, "logs", web.Name, "-c", "debugger")
	if err != nil || out != "/demo-server\x00" {
		t.Errorf("kubectl logs -c debugger = %q, %v; want web's PID 1 command line %q (target's process namespace)", out, err, "/demo-server\x00")
	}

	// `kubectl debug -i`: the ephemeral container's stdin through pods/attach; closing it ends cat.
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, kubectl, "--kubeconfig", kubeconfig, "-n", web.Namespace, "debug", "-i", web.Name,
		"--image="+bundled.DemoServerV1, "--image-pull-policy=Never", "--container=shell", "--", "cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var iout syncBuffer
	cmd.Stdout, cmd.Stderr = &iout, &iout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	go func() { // until attached: what cat reads before the attach is not streamed back
		for cctx.Err() == nil && !strings.Contains(iout.String(), "through-debug") {
			fmt.Fprintln(stdin, "through-debug")
			time.Sleep(500 * time.Millisecond)
		}
	}()
	awaitOutput(t, &iout, "through-debug", 60*time.Second, "a line echoed by the interactive ephemeral container")
	// kubectl debug sets no stdinOnce (as upstream's), so cat outlives the session: kubectl is stopped
	// here, the container with the pod.
	cancel()
	<-done

	// Invalid updates are refused, naming the field.
	p, err := pods.Get(ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, mut func(p *v1.Pod), want string) {
		t.Helper()
		q := p.DeepCopy()
		mut(q)
		_, err := pods.UpdateEphemeralContainers(ctx, q.Name, q, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want 422 Invalid with %q", what, err, want)
		}
	}
	refused("removing the debugger", func(q *v1.Pod) { q.Spec.EphemeralContainers = nil },
		`spec.ephemeralContainers: Forbidden: existing ephemeral containers "debugger" may not be removed`)
	refused("changing the debugger", func(q *v1.Pod) { q.Spec.EphemeralContainers[0].Image = bundled.DemoServerV2 },
		`existing ephemeral containers "debugger" may not be changed`)
	second := v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "second", Image: bundled.DemoServerV1,
		ImagePullPolicy: v1.PullNever, Ports: []v1.ContainerPort{{ContainerPort: 80}}}}
	refused("one with ports", func(q *v1.Pod) { q.Spec.EphemeralContainers = append(q.Spec.EphemeralContainers, second) },
		fmt.Sprintf("spec.ephemeralContainers[%d].ports: Forbidden: cannot be set for an Ephemeral Container", len(p.Spec.EphemeralContainers)))
	second.Ports, second.TargetContainerName = nil, "nope"
	refused("an unknown target", func(q *v1.Pod) { q.Spec.EphemeralContainers = append(q.Spec.EphemeralContainers, second) },
		fmt.Sprintf(`spec.ephemeralContainers[%d].targetContainerName: Not found: "nope"`, len(p.Spec.EphemeralContainers)))
	second.TargetContainerName = ""
	q := p.DeepCopy()
	q.Spec.EphemeralContainers = append(q.Spec.EphemeralContainers, second)
	if _, err := pods.Update(ctx, q, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden: pod updates may not change fields") {
		t.Errorf("adding an ephemeral container through the pod itself: %v, want 422 spec: Forbidden", err)
	}

	t.Run("Node", func(t *testing.T) {
		hostname, err := os.ReadFile("/etc/hostname")
		if err != nil {
			t.Skipf("no /etc/hostname on the host: %v", err)
		}
		out, err := run("debug", "node/"+nodeName, "--image="+bundled.DemoServerV1, "--image-pull-policy=Never", "--", "cat", "/host/etc/hostname")
		if err != nil {
			t.Fatalf("kubectl debug node: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`Creating debugging pod (\S+) with container`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kubectl debug node did not name its pod:\n%s", out)
		}
		nodePods := admin.CoreV1().Pods("default")
		t.Cleanup(func() {
			zero := int64(0)
			nodePods.Delete(context.Background(), m[1], metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		waitFor(t, 60*time.Second, "node debugging pod Succeeded", func() (bool, string) {
			p, err := nodePods.Get(ctx, m[1], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == v1.PodSucceeded && p.Spec.HostPID && p.Spec.HostNetwork, fmt.Sprintf("%s hostPID=%v", p.Status.Phase, p.Spec.HostPID)
		})
		if out, err := run("logs", m[1]); err != nil || out != string(hostname) {
			t.Errorf("node debugging pod's logs = %q, %v; want the host's /etc/hostname %q", out, err, hostname)
		}
	})
}
