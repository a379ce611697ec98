package static

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
spec:
  containers:
  - name: c
    image: nodekit.local/demo-server:v1
`

type sink struct{ sets [][]*v1.Pod }

func (s *sink) SetStaticPods(p []*v1.Pod) { s.sets = append(s.sets, p) }

func TestReadManifest(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "web.yaml")
	os.WriteFile(p, []byte(manifest), 0o644)
	pod, err := ReadManifest(p, "Node-1")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-node-1" || pod.Namespace != "kube-system" || pod.Spec.NodeName != "node-1" {
		t.Errorf("pod = %s/%s on %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if pod.UID == "" || pod.Annotations[ConfigHashAnnotation] != string(pod.UID) || pod.Annotations[ConfigSourceAnnotation] != "file" {
		t.Errorf("uid %q annotations %v", pod.UID, pod.Annotations)
	}
	if c := pod.Spec.Containers[0]; c.ImagePullPolicy != v1.PullIfNotPresent || c.TerminationMessagePath == "" || pod.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("defaults not applied: %+v", pod.Spec)
	}
	// The hash depends on the content: a changed manifest changes the UID.
	os.WriteFile(p, []byte(strings.Replace(manifest, "demo-server:v1", "demo-server:v2", 1)), 0o644)
	pod2, _ := ReadManifest(p, "node-1")
	if pod2.UID == pod.UID {
		t.Error("changed manifest kept its UID")
	}
	for in, want := range map[string]string{
		strings.Replace(manifest, "containers:", "containerz:", 1):   `unknown field "spec.containerz"`,
		strings.Replace(manifest, "kind: Pod", "kind: Service", 1):   `apiVersion/kind is "v1"/"Service"`,
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n": "spec.containers",
	} {
		os.WriteFile(p, []byte(in), 0o644)
		if _, err := ReadManifest(p, "n"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadManifest(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestMirrorPods(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden.yaml"), []byte("garbage"), 0o644)
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
	sk := &sink{}
	s, err := New(Config{Dir: dir, NodeName: "n1", Client: client, Sink: sk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Sync(ctx)
	m, err := client.CoreV1().Pods("kube-system").Get(ctx, "web-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sk.sets) != 1 || len(sk.sets[0]) != 1 || m.Annotations[ConfigMirrorAnnotation] != string(sk.sets[0][0].UID) {
		t.Fatalf("sink sets %v; mirror annotations %v", sk.sets, m.Annotations)
	}
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "node-uid" || m.OwnerReferences[0].Kind != "Node" {
		t.Errorf("mirror owner = %v", m.OwnerReferences)
	}
	// Unchanged: no new set, mirror kept.
	s.Sync(ctx)
	if len(sk.sets) != 1 {
		t.Errorf("unchanged dir pushed again: %d sets", len(sk.sets))
	}
	// Mirror deleted through the API: recreated.
	client.CoreV1().Pods("kube-system").Delete(ctx, "web-n1", metav1.DeleteOptions{})
	s.Sync(ctx)
	if _, err := client.CoreV1().Pods("kube-system").Get(ctx, "web-n1", metav1.GetOptions{}); err != nil {
		t.Errorf("mirror not recreated: %v", err)
	}
	// Manifest removed: empty set pushed, mirror deleted.
	os.Remove(filepath.Join(dir, "web.yaml"))
	s.Sync(ctx)
	if len(sk.sets) != 2 || len(sk.sets[1]) != 0 {
		t.Errorf("sets after removal = %v", sk.sets)
	}
	if _, err := client.CoreV1().Pods("kube-system").Get(ctx, "web-n1", metav1.GetOptions{}); err == nil {
		t.Error("mirror of a removed manifest still exists")
	}
}
