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
	n.create(pod)
	p := n.waitPod("ephemeral", 60*time.Second, "Running", running)
	if p.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass = %s, want BestEffort", p.Status.QOSClass)
	}
	id := containerStatus(p, "demo").ContainerID
	parent := filepath.Join(n.cgroupRoot, "kubepods", "besteffort", "pod"+string(p.UID))
	for _, ctrl := range []string{"memory", "cpu"} {
		procs := cgroupFile(t, ctrl, parent, id, "cgroup.procs")
		if len(strings.Fields(procs)) == 0 {
			t.Errorf("%s cgroup %s/%s has no process", ctrl, parent, criID(id))
		}
	}
	if got := cgroupFile(t, "cpu", parent, id, "cpu.shares"); got != "2" {
		t.Errorf("cpu.shares = %s, want 2 (no cpu request)", got)
	}
	burstable := filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot, "kubepods", "burstable", "pod"+string(p.UID))
	if _, err := os.Stat(burstable); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("burstable pod cgroup %s: %v, want it absent", burstable, err)
	}
	if got := strings.TrimSpace(n.exec(id, "cat", "/proc/1/oom_score_adj")); got != "1000" {
		t.Errorf("oom_score_adj = %s, want 1000 (BestEffort)", got)
	}
}
