package kubelet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRestartAdoptsRunningPods: a kubelet running in a child process is killed with SIGKILL while it
// runs 20 pods; while it is down one pod is force-deleted (gone from the API), one deleted gracefully
// (deletionTimestamp set), and one created. A new kubelet adopts the 18 survivors — same container IDs,
// restartCount 0, exactly one container and one sandbox each, statuses unchanged — removes the
// force-deleted pod's containers, terminates the gracefully deleted pod and completes its deletion, and
// starts the new pod.
func TestRestartAdoptsRunningPods(t *testing.T) {
	n := newNode(t, true)
	n.startChild()
	const count = 20
	for i := 0; i < count; i++ {
		n.create(n.demoPod(fmt.Sprintf("adopt-%02d", i)))
	}
	before := map[string]*v1.Pod{}
	for i := 0; i < count; i++ {
		name := fmt.Sprintf("adopt-%02d", i)
		before[name] = n.waitPod(name, 120*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	}
	n.killChild()

	ctx := context.Background()
	forced, graceful := before["adopt-00"], before["adopt-01"]
	zero := int64(0)
	if err := n.client.CoreV1().Pods(testNS).Delete(ctx, forced.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	n.deleteGracefully(graceful.Name, 5)
	n.create(n.demoPod("adopt-new"))
	n.start()

	n.waitPod("adopt-new", 60*time.Second, "Running", running)
	n.waitGone(graceful.Name, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(n.podContainers(string(forced.UID)))+len(n.podContainers(string(graceful.UID))) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("containers of the pods deleted while the kubelet was down are still there")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let a few sync rounds pass so any wrongful restart would have happened.
	time.Sleep(3 * time.Second)
	for name, old := range before {
		if name == forced.Name || name == graceful.Name {
			continue
		}
		p, err := n.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		oldCS, newCS := containerStatus(old, "demo"), containerStatus(p, "demo")
		if newCS.ContainerID != oldCS.ContainerID || newCS.RestartCount != 0 || newCS.State.Running == nil {
			t.Errorf("%s: container %s restart %d → %s restart %d", name, oldCS.ContainerID, oldCS.RestartCount, newCS.ContainerID, newCS.RestartCount)
		}
		if ctrs := n.podContainers(string(p.UID)); len(ctrs) != 1 {
			t.Errorf("%s: %d containers in the runtime, want 1", name, len(ctrs))
		}
		sbs, err := n.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}}})
		if err != nil || len(sbs.Items) != 1 {
			t.Errorf("%s: sandboxes %v (err %v), want exactly 1", name, sbs, err)
		}
		ob, _ := json.Marshal(old.Status)
		nb, _ := json.Marshal(p.Status)
		if string(ob) != string(nb) {
			t.Errorf("%s: status changed across the restart:\nbefore %s\nafter  %s", name, ob, nb)
		}
	}
}

// sandboxNetNS returns the sandbox's network namespace path from the runtime's verbose status.
func (n *node) sandboxNetNS(id string) string {
	n.t.Helper()
	st, err := n.rt.CRI.Runtime().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		n.t.Fatal(err)
	}
	return netnsFromInfo(st.Info["info"])
}

// netnsFromInfo reads the network namespace path from containerd's verbose sandbox info (its OCI spec's
// network namespace entry), "" when there is none.
func netnsFromInfo(verbose string) string {
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	_ = json.Unmarshal([]byte(verbose), &info)
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

// TestCreateDeleteCyclesLeaveNothing: 20 create → Running → delete cycles of a pod with tmpfs, configMap
// and emptyDir volumes leave no sandbox, container, network namespace, IP allocation, mount, pod cgroup,
// pod directory or log directory behind.
func TestCreateDeleteCyclesLeaveNothing(t *testing.T) {
	n := newNode(t, false)
	cycles := 20
	if testing.Short() {
		cycles = 5
	}
	if s := os.Getenv("NODEKIT_KUBELET_CYCLES"); s != "" {
		// bench/kubelet/cycles.sh runs the long version.
		var err error
		if cycles, err = strconv.Atoi(s); err != nil || cycles <= 0 {
			t.Fatalf("NODEKIT_KUBELET_CYCLES=%q is not a positive number", s)
		}
	}
	start := time.Now()
	leaks := n.runCycles(cycles)
	took := time.Since(start)
	t.Logf("%d create/delete cycles in %v (%v per cycle), leftovers: %d", cycles, took.Round(time.Millisecond), (took / time.Duration(cycles)).Round(time.Millisecond), len(leaks))
	for _, l := range leaks {
		t.Error(l)
	}
}

// runCycles runs create/delete cycles and returns what was left behind (empty: nothing).
func (n *node) runCycles(cycles int) []string {
	t := n.t
	ctx := context.Background()
	if _, err := n.client.CoreV1().ConfigMaps(testNS).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cycle"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var netns []string
	for i := 0; i < cycles; i++ {
		name := fmt.Sprintf("cycle-%03d", i)
		pod := n.demoPod(name)
		pod.Spec.Volumes = []v1.Volume{
			{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
			{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cycle"}}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}, {Name: "disk", MountPath: "/disk"}, {Name: "cm", MountPath: "/cm"}}
		n.create(pod)
		p := n.waitPod(name, 60*time.Second, "Running", running)
		sbs, err := n.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}}})
		if err != nil || len(sbs.Items) == 0 {
			t.Fatalf("no sandbox for %s: %v", name, err)
		}
		if ns := n.sandboxNetNS(sbs.Items[0].Id); ns != "" {
			netns = append(netns, ns)
		}
		n.deleteGracefully(name, 2)
		n.waitGone(name, 30*time.Second)
	}
	var leaks []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		leaks = n.leftovers(netns)
		if len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (n *node) leftovers(netns []string) []string {
	ctx := context.Background()
	var out []string
	sbs, err := n.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return []string{err.Error()}
	}
	if len(sbs.Items) > 0 {
		out = append(out, fmt.Sprintf("%d sandboxes left", len(sbs.Items)))
	}
	ctrs, err := n.rt.CRI.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return []string{err.Error()}
	}
	if len(ctrs.Containers) > 0 {
		out = append(out, fmt.Sprintf("%d containers left", len(ctrs.Containers)))
	}
	for _, ns := range netns {
		if _, err := os.Stat(ns); err == nil {
			out = append(out, "network namespace left: "+ns)
		}
	}
	if len(netns) == 0 {
		out = append(out, "no network namespace paths were observed (cannot check them)")
	}
	ipam, _ := filepath.Glob(filepath.Join(n.rt.Dir, "ipam", "*", "*"))
	for _, f := range ipam {
		b := filepath.Base(f)
		if !strings.HasPrefix(b, "last_reserved_ip") && b != "lock" {
			out = append(out, "IP allocation left: "+f)
		}
	}
	if mounts, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(n.rootDir)); len(mounts) > 0 {
		out = append(out, fmt.Sprintf("%d mounts left under %s", len(mounts), n.rootDir))
	}
	if e, _ := os.ReadDir(filepath.Join(n.rootDir, "pods")); len(e) > 0 {
		out = append(out, fmt.Sprintf("%d pod directories left", len(e)))
	}
	if e, _ := os.ReadDir(n.logDir); len(e) > 0 {
		out = append(out, fmt.Sprintf("%d pod log directories left", len(e)))
	}
	for _, qos := range []string{"", "burstable", "besteffort"} {
		dir := filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot, "kubepods", qos)
		e, _ := os.ReadDir(dir)
		for _, d := range e {
			if d.IsDir() && strings.HasPrefix(d.Name(), "pod") {
				out = append(out, "pod cgroup left: "+filepath.Join(dir, d.Name()))
			}
		}
	}
	return out
}

// TestOrphanedContainersRemoved: a sandbox and container made behind the kubelet's back (while it was
// not running) with pod labels of a pod the API does not have are stopped and removed once it starts (as
// the kubelet does with unknown pods).
func TestOrphanedContainersRemoved(t *testing.T) {
	// The orphan is made before the kubelet starts (a running kubelet can remove a half-made one before
	// its container exists), then the kubelet must find and remove it.
	n := newNode(t, true)
	orphan := n.rt.RunDemoPod(t, "orphan")
	sandboxID, sb := orphan.SandboxID, orphan.Sandbox
	n.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sbs, err := n.rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{
			Filter: &runtimeapi.PodSandboxFilter{Id: sandboxID}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs.Items) == 0 && len(n.podContainers(sb.Metadata.Uid)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphaned sandbox %s still present after 30s", sandboxID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
