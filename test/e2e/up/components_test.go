package up

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/kubelet/processpods"
)

// assertComponentPods checks the control plane in kube-system on a `nodekit up` node: one Running,
// Ready mirror pod per component process (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager, kube-proxy); the API server's pod log (through the kubelet API) holds a line
// the API server logged; killing the scheduler's process (SIGKILL, by the PID its pod reports) bumps its
// pod's restartCount, and the restarted scheduler binds a new pod; a deleted mirror pod comes back.
func (e *env) assertComponentPods(t *testing.T, client kubernetes.Interface, tmpl v1.PodTemplateSpec) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	names := []string{components.Etcd, components.APIServer, components.Scheduler, components.ControllerManager, components.Proxy}
	pods := map[string]*v1.Pod{}
	e.waitFor(t, client, 2*time.Minute, "the component pods to be Running and Ready in kube-system", func() (bool, string) {
		for _, n := range names {
			p, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, processpods.PodName(n, e.nodeName), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.Phase != v1.PodRunning || !podReady(p) {
				return false, fmt.Sprintf("%s: phase %s, ready %v", p.Name, p.Status.Phase, podReady(p))
			}
			if p.Annotations[v1.MirrorPodAnnotationKey] == "" || p.Labels["component"] != n {
				return false, fmt.Sprintf("%s: not a mirror pod with component=%s: %v %v", p.Name, n, p.Annotations, p.Labels)
			}
			pods[n] = p
		}
		return true, ""
	})
	t.Logf("component pods Running and Ready in %v", time.Since(start).Round(time.Millisecond))

	// kubectl logs: the API server's own lines, from its log file through the kubelet API.
	apiPod := pods[components.APIServer]
	b, err := client.CoreV1().Pods(metav1.NamespaceSystem).GetLogs(apiPod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", apiPod.Name, err)
	}
	if !strings.Contains(string(b), `msg="apiserver configured"`) {
		t.Errorf("logs of %s lack the API server's start line:\n%s", apiPod.Name, tail(string(b), 20))
	}
	tailLines := int64(3)
	if b, err = client.CoreV1().Pods(metav1.NamespaceSystem).GetLogs(apiPod.Name, &v1.PodLogOptions{TailLines: &tailLines}).DoRaw(ctx); err != nil {
		t.Fatalf("logs --tail=3 of %s: %v", apiPod.Name, err)
	} else if n := strings.Count(string(b), "\n"); n != 3 {
		t.Errorf("logs --tail=3 of %s: %d lines:\n%s", apiPod.Name, n, b)
	}

	// Kill the scheduler's process: its pod shows the restart, and scheduling works again.
	sched := pods[components.Scheduler]
	pid, err := strconv.Atoi(strings.TrimPrefix(sched.Status.ContainerStatuses[0].ContainerID, processpods.ContainerIDPrefix))
	if err != nil {
		t.Fatalf("scheduler pod's containerID %q: %v", sched.Status.ContainerStatuses[0].ContainerID, err)
	}
	before := sched.Status.ContainerStatuses[0].RestartCount
	if !strings.Contains(e.cmdline(pid), "--run-component="+components.Scheduler) {
		t.Fatalf("pid %d of %s is not the scheduler process: %q", pid, sched.Name, e.cmdline(pid))
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill scheduler pid %d: %v", pid, err)
	}
	e.waitFor(t, client, 2*time.Minute, "the scheduler pod to show a restart", func() (bool, string) {
		p, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, sched.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == before+1 && podReady(p) && cs.ContainerID != sched.Status.ContainerStatuses[0].ContainerID,
			fmt.Sprintf("restartCount %d (was %d), ready %v, %s", cs.RestartCount, before, podReady(p), cs.ContainerID)
	})
	t.Logf("scheduler pid %d killed; its pod Ready again with restartCount %d after %v", pid, before+1, time.Since(killed).Round(time.Millisecond))
	probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after-scheduler-restart", Namespace: "default"}, Spec: *tmpl.Spec.DeepCopy()}
	if _, err := client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		grace := int64(0)
		_ = client.CoreV1().Pods("default").Delete(ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}()
	e.waitFor(t, client, 2*time.Minute, "the restarted scheduler to bind a new pod", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == e.nodeName, "nodeName " + p.Spec.NodeName
	})

	// A mirror pod deleted through the API is recreated by the kubelet.
	cm := pods[components.ControllerManager]
	if err := client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, time.Minute, "the deleted controller manager pod to be recreated", func() (bool, string) {
		p, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != cm.UID && p.DeletionTimestamp == nil, "uid " + string(p.UID)
	})
	t.Logf("component pod checks took %v", time.Since(start).Round(time.Millisecond))
}

func (e *env) cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}
