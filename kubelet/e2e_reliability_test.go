package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubelet/prober"
	"github.com/nodekit/nodekit/kubelet/status"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/test/framework/containerd"
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

// countingRunner runs probes with the real probe handlers and counts the runs per container name.
type countingRunner struct {
	inner prober.Runner
	mu    sync.Mutex
	runs  map[string]int
}

func (r *countingRunner) Run(ctx context.Context, p *v1.Probe, t probes.Target) probes.Result {
	res := r.inner.Run(ctx, p, t)
	r.mu.Lock()
	r.runs[t.Container.Name]++
	r.mu.Unlock()
	return res
}

func (r *countingRunner) count(container string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[container]
}

// startProbed starts the in-process kubelet with a fresh kubelet/prober manager (as the agent runs it)
// whose probe runs are counted; the manager is closed by the returned stop, after the kubelet stopped.
func (n *node) startProbed() (*countingRunner, func()) {
	r := &countingRunner{inner: probes.New(prober.CRIExecer{Runtime: n.rt.CRI.Runtime()}), runs: map[string]int{}}
	pm := prober.New(prober.Options{Runtime: n.rt.CRI.Runtime(), Runner: r})
	n.prober = pm
	n.start()
	return r, func() { n.stop(); pm.Close() }
}

// await polls cond every 100 ms until it holds, failing after timeout.
func await(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReadinessSurvivesRestart: across a kubelet restart (a new kubelet and a new probe manager), a pod
// whose readiness probe passes stays Ready on a watch of the pods — no Ready=False event, the Ready
// transition time unchanged — while the new probes run; a pod whose startup probe has not succeeded yet
// stays unstarted and not ready, with the same container.
func TestReadinessSurvivesRestart(t *testing.T) {
	n := newNode(t, true)
	r, stop := n.startProbed()
	web := n.demoPod("keep-ready")
	web.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}}
	slow := n.demoPod("slow-start")
	slow.Spec.Containers[0].Name = "slow"
	slow.Spec.Containers[0].StartupProbe = &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1000,
		ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(9999)}}}
	n.create(web)
	n.create(slow)
	before := n.waitPod(web.Name, 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	await(t, 30*time.Second, "the startup probe to run", func() bool { return r.count("slow") > 0 })
	slowBefore := n.waitPod(slow.Name, 5*time.Second, "Running, not started", func(p *v1.Pod) bool {
		cs := containerStatus(p, "slow")
		return running(p) && cs.Started != nil && !*cs.Started && !cs.Ready
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	list, err := n.client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.client.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	stop()
	r, stop = n.startProbed()
	defer stop()
	// The new probes have run a few times: the new kubelet synced both pods and wrote what it had to.
	await(t, 30*time.Second, "three runs of each probe after the restart", func() bool { return r.count("demo") >= 3 && r.count("slow") >= 3 })
	// A marker write, so that every event before it has been delivered when it arrives.
	marker := "reliability.nodekit.io/marker"
	patch := []byte(`{"metadata":{"annotations":{"` + marker + `":"1"}}}`)
	if _, err := n.client.CoreV1().Pods(testNS).Patch(ctx, web.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	events := 0
	for done := false; !done; {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended before the marker arrived")
			}
			p, isPod := e.Object.(*v1.Pod)
			if !isPod {
				continue
			}
			events++
			switch p.Name {
			case web.Name:
				if cs := containerStatus(p, "demo"); !ready(p) || cs == nil || !cs.Ready {
					t.Errorf("watch: %s %s not ready across the restart: conditions %+v", e.Type, p.Name, p.Status.Conditions)
				}
				done = p.Annotations[marker] == "1"
			case slow.Name:
				if cs := containerStatus(p, "slow"); ready(p) || cs == nil || cs.Ready || (cs.Started != nil && *cs.Started) {
					t.Errorf("watch: %s %s started or ready in its startup period: %+v", e.Type, p.Name, cs)
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the marker write did not arrive on the watch")
		}
	}
	t.Logf("%d pod events on the watch across the restart", events)
	after := n.waitPod(web.Name, time.Second, "Ready", ready)
	if b, a := podCondition(before, v1.PodReady).LastTransitionTime, podCondition(after, v1.PodReady).LastTransitionTime; !a.Equal(&b) {
		t.Errorf("Ready lastTransitionTime %v → %v across the restart", b, a)
	}
	if b, a := containerStatus(before, "demo"), containerStatus(after, "demo"); a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("web container %s → %s (restarts %d)", b.ContainerID, a.ContainerID, a.RestartCount)
	}
	slowAfter := n.waitPod(slow.Name, time.Second, "unstarted", func(p *v1.Pod) bool {
		cs := containerStatus(p, "slow")
		return cs.Started != nil && !*cs.Started && !cs.Ready
	})
	if b, a := containerStatus(slowBefore, "slow"), containerStatus(slowAfter, "slow"); a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("slow container %s → %s (restarts %d)", b.ContainerID, a.ContainerID, a.RestartCount)
	}
}

// podSandboxes lists the CRI sandboxes of a pod (all states).
func (n *node) podSandboxes(uid types.UID) []*runtimeapi.PodSandbox {
	n.t.Helper()
	resp, err := n.rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.Items
}

// TestExtraReadySandboxKilled: a second ready sandbox made for a running pod through CRI directly (as
// a RunPodSandbox the kubelet gave up on, then finished by the runtime, leaves behind) is killed and the
// pod converges to one ready sandbox, past both attempts, Running and Ready again.
func TestExtraReadySandboxKilled(t *testing.T) {
	n := newNode(t, false)
	pod := n.create(n.demoPod("two-sandboxes"))
	n.waitPod(pod.Name, 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	sbs := n.podSandboxes(pod.UID)
	if len(sbs) != 1 {
		t.Fatalf("%d sandboxes before, want 1", len(sbs))
	}
	cfg := n.rt.SandboxConfig(pod.Name, pod.Namespace)
	cfg.Metadata.Uid, cfg.Metadata.Attempt = string(pod.UID), sbs[0].Metadata.Attempt+1
	cfg.Labels["io.kubernetes.pod.uid"] = string(pod.UID)
	extra, _ := n.rt.RunSandbox(t, cfg)

	var readyIDs []string
	await(t, 60*time.Second, "one ready sandbox", func() bool {
		readyIDs = nil
		for _, sb := range n.podSandboxes(pod.UID) {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				readyIDs = append(readyIDs, sb.Id)
			}
		}
		return len(readyIDs) == 1 && readyIDs[0] != extra && readyIDs[0] != sbs[0].Id
	})
	p := n.waitPod(pod.Name, 60*time.Second, "Running and Ready in the new sandbox", func(p *v1.Pod) bool { return running(p) && ready(p) })
	for _, sb := range n.podSandboxes(pod.UID) {
		if sb.Id == readyIDs[0] && sb.Metadata.Attempt != cfg.Metadata.Attempt+1 {
			t.Errorf("new sandbox attempt %d, want %d (past both)", sb.Metadata.Attempt, cfg.Metadata.Attempt+1)
		}
	}
	for _, c := range n.podContainers(string(p.UID)) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && c.PodSandboxId != readyIDs[0] {
			t.Errorf("container %s runs in sandbox %s, not the ready one %s", c.Id, c.PodSandboxId, readyIDs[0])
		}
	}
}

// netnsOf returns the network namespace path of a sandbox from the runtime's verbose status ("" when
// the sandbox is gone or has none).
func (n *node) netnsOf(id string) string {
	st, err := n.rt.CRI.Runtime().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return ""
	}
	return netnsFromInfo(st.Info["info"])
}

// TestSandboxFailuresHealAndLeaveNothing: with the CNI plugins missing, the node is NotReady with a
// reason naming the missing plugin and pods fail RunPodSandbox again and again; once the plugins are
// installed the node turns Ready and the pods start (no kubelet restart, no "name is reserved" loop),
// and afterwards the runtime has exactly one sandbox per pod and no network namespace nobody uses is
// left.
func TestSandboxFailuresHealAndLeaveNothing(t *testing.T) {
	binDir := t.TempDir()
	n := newNodeWith(t, true, containerd.Options{CNIBinDirs: []string{binDir}})
	// The agent is told the runtime's network (--cni-conf-dir, --cni-bin-dir), as for a containerd 1.x
	// it does not manage: containerd 1.x itself reports NetworkReady=true with the plugins missing.
	n.cfg.CNIConfDir, n.cfg.CNIBinDir = n.rt.CNIConfDir, binDir
	n.cfg.Kubelet.NodeStatusUpdateFrequency = metav1.Duration{Duration: time.Second}
	n.start()
	nodeReady := func() *v1.NodeCondition {
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return &v1.NodeCondition{Message: err.Error()}
		}
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == v1.NodeReady {
				return &node.Status.Conditions[i]
			}
		}
		return &v1.NodeCondition{}
	}
	const wantMsg = `container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni: network `
	await(t, 60*time.Second, "node NotReady naming the missing bridge plugin", func() bool {
		r := nodeReady()
		return r.Status == v1.ConditionFalse && r.Reason == "KubeletNotReady" && strings.HasPrefix(r.Message, wantMsg) &&
			strings.Contains(r.Message, `plugin bridge: failed to find plugin "bridge" in path [`+binDir+`]`)
	})
	t.Logf("node Ready condition with the plugins missing: %s", nodeReady().Message)
	const count = 3
	var pods []*v1.Pod
	for i := 0; i < count; i++ {
		pods = append(pods, n.create(n.demoPod(fmt.Sprintf("no-cni-%d", i))))
	}
	ctx := context.Background()
	netns := map[string]string{} // every sandbox seen → its network namespace
	seen := func() {
		sbs, err := n.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range sbs.Items {
			if _, ok := netns[sb.Id]; !ok || netns[sb.Id] == "" {
				netns[sb.Id] = n.netnsOf(sb.Id)
			}
		}
	}
	await(t, 120*time.Second, "three failed sandbox attempts per pod", func() bool {
		seen()
		for _, p := range pods {
			failed := 0
			for _, r := range n.events(p.Name) {
				if r == "FailedCreatePodSandBox" {
					failed++
				}
			}
			if failed < 3 {
				return false
			}
		}
		return true
	})
	paths := 0
	for _, p := range netns {
		if p != "" {
			paths++
		}
	}
	t.Logf("while the CNI plugins were missing: %d sandboxes seen, %d with a network namespace", len(netns), paths)
	plugins, err := filepath.Glob("/usr/lib/cni/*")
	if err != nil || len(plugins) == 0 {
		t.Fatalf("no CNI plugins in /usr/lib/cni: %v", err)
	}
	for _, p := range plugins {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(binDir, filepath.Base(p)), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	installed := time.Now()
	await(t, 60*time.Second, "node Ready once the plugins are installed", func() bool { return nodeReady().Status == v1.ConditionTrue })
	t.Logf("node Ready %v after the CNI plugins were installed", time.Since(installed).Round(time.Millisecond))
	for _, p := range pods {
		n.waitPod(p.Name, 120*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	}
	t.Logf("all %d pods Ready %v after the CNI plugins were installed", count, time.Since(installed).Round(time.Millisecond))
	live := map[string]bool{}
	var left []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen()
		left, live = nil, map[string]bool{}
		for _, p := range pods {
			sbs := n.podSandboxes(p.UID)
			if len(sbs) != 1 {
				left = append(left, fmt.Sprintf("%s: %d sandboxes", p.Name, len(sbs)))
			}
			for _, sb := range sbs {
				if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
					live[netns[sb.Id]] = true
				}
			}
		}
		for _, p := range netns {
			if _, err := os.Stat(p); p != "" && !live[p] && err == nil {
				left = append(left, "network namespace "+p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60s after the pods started, left behind: %v", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("nothing left %v after the CNI plugins were installed", time.Since(installed).Round(time.Millisecond))
	list, err := n.client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if strings.Contains(e.Message, "is reserved") {
			t.Errorf("event %s on %s: %s (an attempt did not go past the existing sandboxes)", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}
}
