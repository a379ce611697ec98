package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
)

func TestResolveFenceposts(t *testing.T) {
	mk := func(replicas int32, surge, unavail *intstr.IntOrString) *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
		if surge != nil || unavail != nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavail}
		}
		return d
	}
	i := func(v int32) *intstr.IntOrString { x := intstr.FromInt32(v); return &x }
	s := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	cases := []struct {
		d                 *appsv1.Deployment
		surge, unavailble int32
	}{
		{mk(4, nil, nil), 1, 1},        // 25% / 25%
		{mk(10, nil, nil), 3, 2},       // surge rounds up, unavailable down
		{mk(3, i(0), i(0)), 0, 1},      // both zero → unavailable 1
		{mk(5, s("100%"), i(0)), 5, 0}, // blue/green style
		{mk(1, nil, nil), 1, 0},        // 25% of 1
		{mk(4, i(2), s("50%")), 2, 2},  // mixed
	}
	for _, tc := range cases {
		surge, unavail := resolveFenceposts(tc.d)
		if surge != tc.surge || unavail != tc.unavailble {
			t.Errorf("replicas %d: fenceposts = %d/%d, want %d/%d", *tc.d.Spec.Replicas, surge, unavail, tc.surge, tc.unavailble)
		}
	}
}

func TestTemplateHashAndEquality(t *testing.T) {
	tmpl := v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}}}
	tmpl.Labels = map[string]string{"app": "web"}
	h1 := podutil.TemplateHash(&tmpl, nil)
	if h1 != podutil.TemplateHash(tmpl.DeepCopy(), nil) {
		t.Fatal("hash not stable")
	}
	cc := int32(1)
	if h1 == podutil.TemplateHash(&tmpl, &cc) {
		t.Fatal("collision count does not change the hash")
	}
	v2 := tmpl.DeepCopy()
	v2.Spec.Containers[0].Image = "demo:v2"
	if h1 == podutil.TemplateHash(v2, nil) || equalIgnoreHash(&tmpl, v2) {
		t.Fatal("different templates look alike")
	}
	hashed := tmpl.DeepCopy()
	hashed.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = h1
	if !equalIgnoreHash(&tmpl, hashed) {
		t.Fatal("the pod-template-hash label must not make templates differ")
	}
}
