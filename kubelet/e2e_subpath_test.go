package kubelet_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/images/bundled"
)

// TestSubPathSymlinkEscape is the CVE-2017-1002101 attack on real containerd: container "planter"
// mounts an emptyDir whole; container "victim" mounts a subPath of it and exits every 2 s. Once the
// victim has run with a real directory there, the planter replaces it with a symlink to a host
// directory; the victim's restart must fail with CreateContainerConfigError naming the escape, never
// mount the host directory, and leave it untouched. A subPath through a symlink that stays inside the
// volume keeps working.
func TestSubPathSymlinkEscape(t *testing.T) {
	n := newNode(t, false)
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "host-secret"), []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	pod := n.demoPod("subpath")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].Name = "planter"
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
		Name: "victim", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sleep", "2"},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/sub", SubPath: "link"}, {Name: "data", MountPath: "/inner", SubPath: "inner/x"}},
	})
	n.create(pod)
	p := n.waitPod("subpath", 60*time.Second, "the victim started once", func(p *v1.Pod) bool {
		cs := containerStatus(p, "victim")
		return cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0) && containerStatus(p, "planter").State.Running != nil
	})
	planter := containerStatus(p, "planter").ContainerID
	// subPaths the kubelet created as directories inside the volume
	if out := n.exec(planter, "ls", "/data"); !strings.Contains(out, "link") || !strings.Contains(out, "inner") {
		t.Fatalf("the subPath directories were not created in the emptyDir: %q", out)
	}
	// the attack: the planter swaps the subPath directory for a symlink to the host directory, and an
	// inner subPath component for a symlink that stays inside the volume
	n.exec(planter, "rm", "-r", "/data/link")
	n.exec(planter, "ln", "-s", hostDir, "/data/link")
	n.exec(planter, "rm", "-r", "/data/inner")
	n.exec(planter, "ln", "-s", "../..", "/data/inner") // leaves the volume
	p = n.waitPod("subpath", 60*time.Second, "the victim refused with CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := containerStatus(p, "victim")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
	})
	msg := containerStatus(p, "victim").State.Waiting.Message
	if !strings.Contains(msg, `subPath "link" resolves outside the volume "data"`) {
		t.Fatalf("victim's waiting message %q does not name the escape", msg)
	}
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.Mountpoint, hostDir) {
			t.Errorf("something is mounted on the host directory: %s", m.Mountpoint)
		}
	}
	entries, err := os.ReadDir(hostDir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "host-secret" {
		t.Fatalf("host directory changed: %v %v", entries, err)
	}
	if b, _ := os.ReadFile(filepath.Join(hostDir, "host-secret")); string(b) != "host" {
		t.Fatalf("host file changed: %q", b)
	}
	// Point both links inside the volume (its root): the victim runs again, its inner subPath created
	// through the in-volume symlink.
	n.exec(planter, "rm", "/data/link")
	n.exec(planter, "ln", "-s", ".", "/data/link")
	n.exec(planter, "rm", "/data/inner")
	n.exec(planter, "ln", "-s", ".", "/data/inner")
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(n.exec(planter, "ls", "/data"), "x") {
		if time.Now().After(deadline) {
			t.Fatalf("the victim did not start again with in-volume symlinks: %+v", containerStatus(n.waitPod("subpath", time.Second, "any", func(*v1.Pod) bool { return true }), "victim"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.waitPod("subpath", 60*time.Second, "the victim running or exited cleanly again", func(p *v1.Pod) bool {
		cs := containerStatus(p, "victim")
		return cs.State.Running != nil || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0) ||
			(cs.State.Waiting != nil && cs.State.Waiting.Reason != "CreateContainerConfigError")
	})
	n.deleteGracefully("subpath", 1)
	n.waitGone("subpath", 30*time.Second)
	deadline = time.Now().Add(15 * time.Second)
	for {
		left, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(n.rootDir))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deletion: %d mounts left under %s (subPath bind mounts not torn down)", len(left), n.rootDir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
