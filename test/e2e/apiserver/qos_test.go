package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/podspec/podspectest"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestQOSClassAtCreate: the apiserver sets status.qosClass at create by upstream's rule, for every case
// of the QoS table (only cpu and memory count, zero quantities do not, init containers and pod-level
// resources do), whatever status the client sent, and stores it.
func TestQOSClassAtCreate(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, pods := ctxT(t), s.Client.CoreV1().Pods("default")
	for _, c := range podspectest.QOSCases() {
		// A client's status is not trusted: claim a class the pod must not get.
		c.Pod.Status.QOSClass = corev1.PodQOSGuaranteed
		if c.Want == corev1.PodQOSGuaranteed {
			c.Pod.Status.QOSClass = corev1.PodQOSBestEffort
		}
		created, err := pods.Create(ctx, c.Pod, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s: create: %v", c.Name, err)
			continue
		}
		if created.Status.QOSClass != c.Want {
			t.Errorf("%s: created with qosClass %q, want %q", c.Name, created.Status.QOSClass, c.Want)
		}
		got, err := pods.Get(ctx, c.Pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: get: %v", c.Name, err)
			continue
		}
		if got.Status.QOSClass != c.Want {
			t.Errorf("%s: stored qosClass %q, want %q", c.Name, got.Status.QOSClass, c.Want)
		}
	}
}
