package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/podspec"
)

func hasCause(errs field.ErrorList, path string, typ field.ErrorType) bool {
	for _, e := range errs {
		if e.Field == path && e.Type == typ {
			return true
		}
	}
	return false
}

// TestPodUpdateTolerations: tolerations may be added and their tolerationSeconds changed, never removed or
// otherwise modified.
func TestPodUpdateTolerations(t *testing.T) {
	secs, other := int64(300), int64(60)
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		Containers:  []corev1.Container{{Name: "c", Image: "i"}},
		Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}},
	}}
	podspec.Default(&old.Spec)
	for _, tc := range []struct {
		name string
		edit func(p *corev1.Pod)
		ok   bool
	}{
		{"unchanged", func(*corev1.Pod) {}, true},
		{"added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}, true},
		{"seconds changed", func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = &other }, true},
		{"removed", func(p *corev1.Pod) { p.Spec.Tolerations = nil }, false},
		{"effect changed", func(p *corev1.Pod) { p.Spec.Tolerations[0].Effect = corev1.TaintEffectNoSchedule }, false},
	} {
		p := old.DeepCopy()
		tc.edit(p)
		errs := PodUpdate(p, old)
		if tc.ok && len(errs) != 0 {
			t.Errorf("%s: %v", tc.name, errs)
		}
		if !tc.ok && !hasCause(errs, "spec.tolerations", field.ErrorTypeForbidden) {
			t.Errorf("%s: want Forbidden on spec.tolerations, got %v", tc.name, errs)
		}
	}
}

// TestServiceDuplicatePorts: a port/protocol pair and a nodePort/protocol pair may each appear once; the
// same number with another protocol is fine.
func TestServiceDuplicatePorts(t *testing.T) {
	svc := func(ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			SessionAffinity: corev1.ServiceAffinityNone, Ports: ports}}
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	if errs := Service(svc(corev1.ServicePort{Name: "a", Port: 53, Protocol: tcp, NodePort: 30053}, corev1.ServicePort{Name: "b", Port: 53, Protocol: udp, NodePort: 30053})); len(errs) != 0 {
		t.Errorf("53/TCP and 53/UDP on one nodePort: %v", errs)
	}
	errs := Service(svc(corev1.ServicePort{Name: "a", Port: 80, Protocol: tcp}, corev1.ServicePort{Name: "b", Port: 80, Protocol: tcp}))
	if !hasCause(errs, "spec.ports[1]", field.ErrorTypeDuplicate) {
		t.Errorf("duplicate 80/TCP: %v", errs)
	}
	errs = Service(svc(corev1.ServicePort{Name: "a", Port: 80, Protocol: tcp, NodePort: 30080}, corev1.ServicePort{Name: "b", Port: 81, Protocol: tcp, NodePort: 30080}))
	if !hasCause(errs, "spec.ports[1].nodePort", field.ErrorTypeDuplicate) {
		t.Errorf("duplicate nodePort: %v", errs)
	}
}

// TestHeadlessNodePort: a NodePort service cannot be headless (it needs a ClusterIP to forward to).
func TestHeadlessNodePort(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		ClusterIP: corev1.ClusterIPNone, SessionAffinity: corev1.ServiceAffinityNone, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if errs := Service(svc); !hasCause(errs, "spec.clusterIP", field.ErrorTypeInvalid) {
		t.Errorf("headless NodePort service: %v", errs)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if errs := Service(svc); len(errs) != 0 {
		t.Errorf("headless ClusterIP service: %v", errs)
	}
}

// TestContainerResourcesAndEnv: negative quantities, requests above limits and env names with '=' are
// refused with the path of the offending entry.
func TestContainerResourcesAndEnv(t *testing.T) {
	pod := func(edit func(c *corev1.Container)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		edit(&p.Spec.Containers[0])
		podspec.Default(&p.Spec)
		return p
	}
	for _, tc := range []struct {
		name, field string
		edit        func(c *corev1.Container)
	}{
		{"negative limit", "spec.containers[0].resources.limits[memory]", func(c *corev1.Container) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}
		}},
		{"negative request", "spec.containers[0].resources.requests[cpu]", func(c *corev1.Container) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-100m")}
		}},
		{"request above limit", "spec.containers[0].resources.requests[cpu]", func(c *corev1.Container) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}},
		{"env name with =", "spec.containers[0].env[0].name", func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "A=B", Value: "x"}}
		}},
		{"empty env name", "spec.containers[0].env[0].name", func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "", Value: "x"}}
		}},
	} {
		if errs := Pod(pod(tc.edit)); !hasCause(errs, tc.field, field.ErrorTypeInvalid) {
			t.Errorf("%s: want Invalid on %s, got %v", tc.name, tc.field, errs)
		}
	}
	ok := pod(func(c *corev1.Container) {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		c.Env = []corev1.EnvVar{{Name: "HTTP_PORT", Value: "80"}, {Name: "my.var-1", Value: "x"}, {Name: "1st var", Value: "relaxed names (Kubernetes 1.34+)"}}
	})
	if errs := Pod(ok); len(errs) != 0 {
		t.Errorf("valid resources and env: %v", errs)
	}
}

// TestTerminationMessagePolicy: File and FallbackToLogsOnError are accepted, another value is
// NotSupported (kube-apiserver's error), an empty one Required.
func TestTerminationMessagePolicy(t *testing.T) {
	const f = "spec.containers[0].terminationMessagePolicy"
	for _, tc := range []struct {
		policy corev1.TerminationMessagePolicy
		want   field.ErrorType // "" for valid
	}{
		{corev1.TerminationMessageReadFile, ""},
		{corev1.TerminationMessageFallbackToLogsOnError, ""},
		{"Logs", field.ErrorTypeNotSupported},
		{"", field.ErrorTypeRequired},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		podspec.Default(&p.Spec)
		p.Spec.Containers[0].TerminationMessagePolicy = tc.policy
		errs := Pod(p)
		switch {
		case tc.want == "" && len(errs) != 0:
			t.Errorf("%q: %v", tc.policy, errs)
		case tc.want != "" && !hasCause(errs, f, tc.want):
			t.Errorf("%q: want %s on %s, got %v", tc.policy, tc.want, f, errs)
		}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", TerminationMessagePolicy: "Logs"}}}}
	podspec.Default(&p.Spec)
	if errs := Pod(p); len(errs) != 1 || errs[0].Error() != `spec.containers[0].terminationMessagePolicy: Unsupported value: "Logs": supported values: "File", "FallbackToLogsOnError"` {
		t.Errorf("message: %v", errs)
	}
}

// TestDeploymentRollingUpdate: maxSurge/maxUnavailable must be non-negative integers or percentages,
// maxUnavailable at most 100%, not both zero, and only with the RollingUpdate type; counts are >= 0.
func TestDeploymentRollingUpdate(t *testing.T) {
	dep := func(edit func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{}}}}
		podspec.Default(&d.Spec.Template.Spec)
		edit(d)
		return d
	}
	is := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	neg := int32(-1)
	for _, tc := range []struct {
		name, field string
		edit        func(d *appsv1.Deployment)
	}{
		{"negative maxSurge", "spec.strategy.rollingUpdate.maxSurge", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = is(intstr.FromInt32(-1)) }},
		{"garbage percent", "spec.strategy.rollingUpdate.maxSurge", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = is(intstr.FromString("lots")) }},
		{"maxUnavailable 150%", "spec.strategy.rollingUpdate.maxUnavailable", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = is(intstr.FromString("150%"))
		}},
		{"both zero", "spec.strategy.rollingUpdate.maxUnavailable", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable, d.Spec.Strategy.RollingUpdate.MaxSurge = is(intstr.FromInt32(0)), is(intstr.FromString("0%"))
		}},
		{"rollingUpdate with Recreate", "spec.strategy.rollingUpdate", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }},
		{"negative revisionHistoryLimit", "spec.revisionHistoryLimit", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = &neg }},
	} {
		if errs := Deployment(dep(tc.edit)); !hasCause(errs, tc.field, field.ErrorTypeInvalid) && !hasCause(errs, tc.field, field.ErrorTypeForbidden) {
			t.Errorf("%s: want a cause on %s, got %v", tc.name, tc.field, errs)
		}
	}
	ok := dep(func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate.MaxUnavailable, d.Spec.Strategy.RollingUpdate.MaxSurge = is(intstr.FromString("25%")), is(intstr.FromInt32(0))
	})
	if errs := Deployment(ok); len(errs) != 0 {
		t.Errorf("maxUnavailable 25%%, maxSurge 0: %v", errs)
	}
}

// TestDuplicateHostPorts: two containers of a pod cannot claim one hostPort for the same protocol and IP.
func TestDuplicateHostPorts(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}},
		{Name: "b", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8080}, {ContainerPort: 82, HostPort: 8080, Protocol: corev1.ProtocolUDP}}},
	}}}
	podspec.Default(&pod.Spec)
	errs := Pod(pod)
	if !hasCause(errs, "spec.containers[1].ports[0].hostPort", field.ErrorTypeDuplicate) || len(errs) != 1 {
		t.Errorf("want one Duplicate on spec.containers[1].ports[0].hostPort (8080/UDP is fine), got %v", errs)
	}
}
