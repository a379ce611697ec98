package fieldpath

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExtract(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"b": "2", "a": "x\"y"}, Annotations: map[string]string{"k": "v"}},
		Spec:       v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
		Status:     v1.PodStatus{PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}, HostIP: "192.0.2.1"},
	}
	for path, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "ns", "metadata.uid": "u", "metadata.labels['b']": "2",
		"metadata.annotations['k']": "v", "metadata.labels": "a=\"x\\\"y\"\nb=\"2\"", "spec.nodeName": "n1",
		"spec.serviceAccountName": "sa", "status.podIP": "10.0.0.1", "status.podIPs": "10.0.0.1,fd00::1", "status.hostIP": "192.0.2.1",
	} {
		got, err := Extract(pod, path)
		if err != nil || got != want {
			t.Errorf("Extract(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := Extract(pod, "spec.bogus"); err == nil {
		t.Errorf("unsupported path accepted")
	}
}

func TestResource(t *testing.T) {
	c := &v1.Container{Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}}
	alloc := v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}
	for _, tc := range []struct {
		res, divisor, want string
	}{
		{"limits.cpu", "", "2"}, {"limits.cpu", "1m", "1500"}, {"requests.cpu", "1m", "250"},
		{"limits.memory", "1Mi", "64"}, {"requests.memory", "1Gi", "2"},
	} {
		ref := &v1.ResourceFieldSelector{Resource: tc.res}
		if tc.divisor != "" {
			ref.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := Resource(c, ref, alloc)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s = %q, %v; want %s", tc.res, tc.divisor, got, err, tc.want)
		}
	}
	if _, err := Resource(c, &v1.ResourceFieldSelector{Resource: "bogus"}, nil); err == nil {
		t.Errorf("bad resource accepted")
	}
}
