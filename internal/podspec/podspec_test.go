package podspec_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/internal/podspec/podspectest"
)

func TestComputeQOSClass(t *testing.T) {
	for _, c := range podspectest.QOSCases() {
		if got := podspec.ComputeQOSClass(c.Pod); got != c.Want {
			t.Errorf("%s: %s, want %s", c.Name, got, c.Want)
		}
		// The API defaults a pod before it computes the class; defaulting must not change it.
		podspec.Default(&c.Pod.Spec)
		if got := podspec.ComputeQOSClass(c.Pod); got != c.Want {
			t.Errorf("%s, defaulted: %s, want %s", c.Name, got, c.Want)
		}
	}
}

func TestQOSClassTrustsStatus(t *testing.T) {
	p := podspectest.Pod("p", v1.ResourceRequirements{})
	if got := podspec.QOSClass(p); got != v1.PodQOSBestEffort {
		t.Errorf("no status.qosClass: %s, want BestEffort", got)
	}
	p.Status.QOSClass = v1.PodQOSGuaranteed
	if got := podspec.QOSClass(p); got != v1.PodQOSGuaranteed {
		t.Errorf("status.qosClass Guaranteed: %s, want it kept", got)
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":                                v1.PullAlways,
		"busybox:latest":                         v1.PullAlways,
		"busybox:1.36":                           v1.PullIfNotPresent,
		"registry:5000/busybox":                  v1.PullAlways,
		"registry:5000/busybox:1.36":             v1.PullIfNotPresent,
		"registry:5000/library/busybox:latest":   v1.PullAlways,
		"busybox@sha256:0123456789abcdef":        v1.PullIfNotPresent,
		"busybox:1.36@sha256:0123456789abcdef":   v1.PullIfNotPresent,
		"busybox:latest@sha256:0123456789abcdef": v1.PullAlways,
		"registry:5000/busybox@sha256:0123":      v1.PullIfNotPresent,
	} {
		if got := podspec.DefaultPullPolicy(image); got != want {
			t.Errorf("DefaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	for phase, want := range map[v1.PodPhase]bool{
		v1.PodPending: false, v1.PodRunning: false, v1.PodUnknown: false, "": false,
		v1.PodSucceeded: true, v1.PodFailed: true,
	} {
		if got := podspec.IsTerminal(phase); got != want {
			t.Errorf("IsTerminal(%q) = %v, want %v", phase, got, want)
		}
	}
}

func TestDefault(t *testing.T) {
	p := podspectest.Pod("p", podspectest.Req(nil, podspectest.List("cpu", "1", "memory", "1Gi")))
	p.Spec.Containers[0].Image = "busybox"
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}}
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{}}}
	p.Spec.Volumes = []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}}
	podspec.Default(&p.Spec)
	s, c := &p.Spec, &p.Spec.Containers[0]
	if s.RestartPolicy != v1.RestartPolicyAlways || s.DNSPolicy != v1.DNSClusterFirst || *s.TerminationGracePeriodSeconds != 30 ||
		s.SchedulerName != v1.DefaultSchedulerName || s.SecurityContext == nil || !*s.EnableServiceLinks {
		t.Errorf("pod spec defaults: %+v", s)
	}
	if *s.Volumes[0].ConfigMap.DefaultMode != 0o644 {
		t.Errorf("configMap defaultMode = %o, want 644", *s.Volumes[0].ConfigMap.DefaultMode)
	}
	if c.ImagePullPolicy != v1.PullAlways || c.TerminationMessagePath != "/dev/termination-log" ||
		c.TerminationMessagePolicy != v1.TerminationMessageReadFile || c.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("container defaults: %+v", c)
	}
	if r := c.Resources.Requests; !r.Cpu().Equal(resource.MustParse("1")) || !r.Memory().Equal(resource.MustParse("1Gi")) {
		t.Errorf("requests = %v, want the limits", r)
	}
	if pr := c.ReadinessProbe; pr.TimeoutSeconds != 1 || pr.PeriodSeconds != 10 || pr.SuccessThreshold != 1 || pr.FailureThreshold != 3 ||
		pr.HTTPGet.Path != "/" || pr.HTTPGet.Scheme != v1.URISchemeHTTP {
		t.Errorf("probe defaults: %+v", pr)
	}
	// Set fields are kept.
	q := podspectest.Pod("q", podspectest.Req(podspectest.List("cpu", "100m"), podspectest.List("cpu", "1")))
	q.Spec.RestartPolicy, q.Spec.Containers[0].ImagePullPolicy = v1.RestartPolicyNever, v1.PullNever
	podspec.Default(&q.Spec)
	if q.Spec.RestartPolicy != v1.RestartPolicyNever || q.Spec.Containers[0].ImagePullPolicy != v1.PullNever ||
		!q.Spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("100m")) {
		t.Errorf("set fields changed: %+v", q.Spec)
	}
}
