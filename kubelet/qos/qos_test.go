package qos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestClass(t *testing.T) {
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	pod := func(rs ...v1.ResourceRequirements) *v1.Pod {
		p := &v1.Pod{}
		for _, r := range rs {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: r})
		}
		return p
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing set", pod(v1.ResourceRequirements{}), v1.PodQOSBestEffort},
		{"limits only, both", pod(v1.ResourceRequirements{Limits: rl("1", "1Gi")}), v1.PodQOSGuaranteed},
		{"requests equal limits", pod(v1.ResourceRequirements{Requests: rl("500m", "64Mi"), Limits: rl("500m", "64Mi")}), v1.PodQOSGuaranteed},
		{"requests below limits", pod(v1.ResourceRequirements{Requests: rl("250m", "32Mi"), Limits: rl("500m", "64Mi")}), v1.PodQOSBurstable},
		{"memory limit only", pod(v1.ResourceRequirements{Limits: rl("", "64Mi")}), v1.PodQOSBurstable},
		{"one guaranteed, one empty", pod(v1.ResourceRequirements{Limits: rl("1", "1Gi")}, v1.ResourceRequirements{}), v1.PodQOSBurstable},
	}
	for _, c := range cases {
		if got := Class(c.pod); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
