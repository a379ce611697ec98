package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStartCreateRestart(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	got, err := s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.RestartPolicy != corev1.RestartPolicyAlways || got.Status.Phase != corev1.PodPending || got.UID == "" {
		t.Fatalf("defaults not applied: %+v", got)
	}
	s.Restart(t)
	if _, err := s.Client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NodeClient(t, "n1").CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"}); err != nil {
		t.Fatal(err)
	}
}
