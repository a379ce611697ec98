package kubelet_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStaticPods: a pod handed to SetStaticPods (as the node's manifest source does) runs without an
// API object of its own; its status is written to its mirror pod; mirror pods themselves are never run;
// dropping it from the set terminates and removes it.
func TestStaticPods(t *testing.T) {
	n := newNode(t, false)
	static := n.demoPod("static-web")
	static.UID = types.UID("static-" + randSuffix())
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": string(static.UID)}
	static.Spec.Containers[0].TerminationMessagePath = v1.TerminationMessagePathDefault
	mirror := static.DeepCopy()
	mirror.UID = ""
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": string(static.UID), "kubernetes.io/config.source": "file"}
	n.create(mirror)

	n.mu.Lock()
	kl := n.kl
	n.mu.Unlock()
	kl.SetStaticPods([]*v1.Pod{static})
	p := n.waitPod("static-web", 60*time.Second, "mirror pod Running", running)
	if got := len(n.podContainers(string(static.UID))); got != 1 {
		t.Errorf("%d containers for the static pod, want 1", got)
	}
	if got := len(n.podContainers(string(p.UID))); got != 0 {
		t.Errorf("the mirror pod itself was run (%d containers)", got)
	}
	if _, ok := kl.GetPodByName(testNS, "static-web"); !ok {
		t.Errorf("GetPodByName does not know the static pod")
	}
	kl.SetStaticPods(nil)
	deadline := time.Now().Add(30 * time.Second)
	for len(n.podContainers(string(static.UID))) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("static pod's containers still there after it left the set")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The mirror pod is the node source's to delete, not the kubelet's.
	if _, err := n.client.CoreV1().Pods(testNS).Get(context.Background(), "static-web", metav1.GetOptions{}); err != nil {
		t.Errorf("mirror pod: %v", err)
	}
}
