package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podspec/podspectest"
)

func TestEffectiveResources(t *testing.T) {
	req := func(cpu string) v1.ResourceRequirements { return podspectest.Req(podspectest.List("cpu", cpu), nil) }
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	cases := []struct {
		name string
		pod  *v1.Pod
		want string // cpu
	}{
		{"sum of app containers", podspectest.Pod("p", req("100m"), req("200m")), "300m"},
		{"an init container larger than the app sum", podspectest.WithInit(podspectest.Pod("p", req("100m"), req("200m")), false, req("1")), "1"},
		{"an init container smaller than the app sum", podspectest.WithInit(podspectest.Pod("p", req("500m")), false, req("200m")), "500m"},
		{"sidecars add to the app containers", podspectest.WithInit(podspectest.Pod("p", req("500m")), true, req("100m"), req("200m")), "800m"},
		// init-0 (sidecar, 300m) runs while init-1 (1) initializes: 1.3 beats 300m + 500m.
		{"an init container after a sidecar", podspectest.WithInit(podspectest.WithInit(podspectest.Pod("p", req("500m")), true, req("300m")), false, req("1")), "1300m"},
		// init-0 runs before the sidecar starts: 1 alone beats 200m + 500m.
		{"an init container before a sidecar", podspectest.WithInit(podspectest.WithInit(podspectest.Pod("p", req("500m")), false, req("1")), true, req("200m")), "1"},
	}
	for _, c := range cases {
		got := effectiveResources(c.pod, requests)[v1.ResourceCPU]
		if got.String() != c.want {
			t.Errorf("%s: cpu %s, want %s", c.name, got.String(), c.want)
		}
	}
}
