package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// TestTerminationMessageFile: the file is created 0666 whatever the umask and mounted at the (absolute)
// path; only the mount whose file lies in the container's directory is read, at most 4096 bytes (the
// tail); a missing file or one that is not regular gives no message or an error message.
func TestTerminationMessageFile(t *testing.T) {
	root := t.TempDir()
	m := &Manager{opts: Options{PodContainerDir: func(uid types.UID, c string) string { return filepath.Join(root, string(uid), c) }}}
	c := &v1.Container{Name: "c", TerminationMessagePath: "dev/msg"}
	mt, err := terminationMessageMount(m.opts.PodContainerDir("u1", "c"), c)
	if err != nil {
		t.Fatal(err)
	}
	if mt.ContainerPath != "/dev/msg" || filepath.Dir(mt.HostPath) != filepath.Join(root, "u1", "c") {
		t.Fatalf("mount %+v", mt)
	}
	if fi, err := os.Stat(mt.HostPath); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("file mode %v %v, want 0666", fi.Mode(), err)
	}
	if mt, err := terminationMessageMount("", c); mt != nil || err != nil {
		t.Errorf("no directory: %v %v", mt, err)
	}
	status := func(host string) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{
			Labels:      map[string]string{kubelettypes.KubernetesPodUIDLabel: "u1", kubelettypes.KubernetesContainerNameLabel: "c"},
			Annotations: map[string]string{annotationTerminationMessage: "dev/msg"},
			State:       runtimeapi.ContainerState_CONTAINER_EXITED,
			Mounts:      []*runtimeapi.Mount{{ContainerPath: "/dev/msg", HostPath: host}},
		}
	}
	long := strings.Repeat("a", 5000) + "END"
	if err := os.WriteFile(mt.HostPath, []byte(long), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := m.terminationMessage(t.Context(), status(mt.HostPath)); len(got) != MaxTerminationMessageLength || !strings.HasSuffix(got, "END") {
		t.Errorf("message of %d bytes (suffix END: %v), want the last 4096", len(got), strings.HasSuffix(got, "END"))
	}
	// A mount at that path from elsewhere (e.g. a hostPath volume) is never read.
	other := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(other, []byte("secret"), 0o600)
	if got := m.terminationMessage(t.Context(), status(other)); got != "" {
		t.Errorf("read %q from a file outside the container directory", got)
	}
	os.Remove(mt.HostPath)
	if got := m.terminationMessage(t.Context(), status(mt.HostPath)); got != "" {
		t.Errorf("missing file: %q", got)
	}
	os.Symlink(other, mt.HostPath)
	if got := m.terminationMessage(t.Context(), status(mt.HostPath)); !strings.HasPrefix(got, "Error on reading termination log") {
		t.Errorf("symlink: %q, want an error message", got)
	}
}
