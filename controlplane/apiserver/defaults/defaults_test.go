package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLimitRangeItem(t *testing.T) {
	q := resource.MustParse
	item := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}, Default: corev1.ResourceList{"memory": q("512Mi")},
		Min: corev1.ResourceList{"ephemeral-storage": q("1Gi")}}
	LimitRangeItem(&item)
	if item.Default.Cpu().String() != "2" || item.Default.Memory().String() != "512Mi" {
		t.Errorf("default %v, want cpu from max, memory kept", item.Default)
	}
	if item.DefaultRequest.Cpu().String() != "2" || item.DefaultRequest.Memory().String() != "512Mi" || item.DefaultRequest.StorageEphemeral().String() != "1Gi" {
		t.Errorf("defaultRequest %v, want cpu and memory from default, ephemeral-storage from min", item.DefaultRequest)
	}
	pod := corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"cpu": q("2")}}
	LimitRangeItem(&pod)
	if pod.Default != nil || pod.DefaultRequest != nil {
		t.Errorf("Pod item defaulted: %+v", pod)
	}
}
