package kubelet_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestBestEffortEphemeralStorageCgroup: a pod whose only resource is an ephemeral-storage request is
// BestEffort (only cpu and memory decide the QoS class): the apiserver records it, the kubelet puts its
// container below kubepods/besteffort/pod<uid> in the cpu and memory hierarchies, not below burstable,
// and its processes get BestEffort's OOM score adjustment, 1000.
func TestBestEffortEphemeralStorageCgroup(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		t.Skip("needs cgroup v1 (no /sys/fs/cgroup/memory)")
	}
	n := newNode(t, false)
	pod := n.demoPod("ephemeral")
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("64Mi")}
	p, id, parent := n.runInQOS(pod, v1.PodQOSBestEffort)
	for _, ctrl := range []string{"memory", "cpu"} {
		procs := cgroupFile(t, ctrl, parent, id, "cgroup.procs")
		if len(strings.Fields(procs)) == 0 {
			t.Errorf("%s cgroup %s/%s has no process", ctrl, parent, criID(id))
		}
	}
	if got := cgroupFile(t, "cpu", parent, id, "cpu.shares"); got != "2" {
		t.Errorf("cpu.shares = %s, want 2 (no cpu request)", got)
	}
	if got := cgroupFile(t, "cpu", filepath.Dir(parent), "", "cpu.shares"); got != "2" {
		t.Errorf("besteffort QoS cgroup cpu.shares = %s, want 2", got)
	}
	burstable := filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot, "kubepods", "burstable", "pod"+string(p.UID))
	if _, err := os.Stat(burstable); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("burstable pod cgroup %s: %v, want it absent", burstable, err)
	}
	if got := strings.TrimSpace(n.exec(id, "cat", "/proc/1/oom_score_adj")); got != "1000" {
		t.Errorf("oom_score_adj = %s, want 1000 (BestEffort)", got)
	}
}

// runInQOS creates pod, waits until it runs and checks that the apiserver gave it QoS class want. It
// returns the running pod, the ID of its first container and the pod's cgroup below the node's cgroup
// root as the kubelet lays it out for that class (kubepods/pod<uid>, kubepods/burstable/pod<uid>,
// kubepods/besteffort/pod<uid>).
func (n *node) runInQOS(pod *v1.Pod, want v1.PodQOSClass) (*v1.Pod, string, string) {
	n.t.Helper()
	n.create(pod)
	p := n.waitPod(pod.Name, 60*time.Second, "Running", running)
	if p.Status.QOSClass != want {
		n.t.Errorf("pod %s: qosClass = %s, want %s", pod.Name, p.Status.QOSClass, want)
	}
	parent := []string{n.cgroupRoot, "kubepods"}
	switch want {
	case v1.PodQOSBurstable:
		parent = append(parent, "burstable")
	case v1.PodQOSBestEffort:
		parent = append(parent, "besteffort")
	}
	parent = append(parent, "pod"+string(p.UID))
	return p, containerStatus(p, pod.Spec.Containers[0].Name).ContainerID, filepath.Join(parent...)
}
