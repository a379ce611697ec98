package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/controlplane/apiserver/defaults"
	"github.com/nodekit/nodekit/internal/podspec"
)

func podWithProbe(p *corev1.Probe, readiness bool) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}
	if readiness {
		c.ReadinessProbe = p
	} else {
		c.LivenessProbe = p
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	podspec.Default(&pod.Spec)
	return pod
}

// TestProbeValidation checks each probe rule answers with the field path of the bad field.
func TestProbeValidation(t *testing.T) {
	httpGet := func(port intstr.IntOrString) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: port}}
	}
	grace := int64(0)
	for _, tc := range []struct {
		name      string
		probe     corev1.Probe
		readiness bool
		wantField string // "" = valid
	}{
		{"valid http", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80))}, false, ""},
		{"valid named port", corev1.Probe{ProbeHandler: httpGet(intstr.FromString("http"))}, true, ""},
		{"valid readiness success 3", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), SuccessThreshold: 3}, true, ""},
		{"no handler", corev1.Probe{PeriodSeconds: 5}, false, "spec.containers[0].livenessProbe"},
		{"two handlers", corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}},
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}, false, "spec.containers[0].livenessProbe"},
		{"port 0", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(0))}, false, "spec.containers[0].livenessProbe.httpGet.port"},
		{"port 65536", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(65536)}}}, false, "spec.containers[0].livenessProbe.tcpSocket.port"},
		{"unknown named port", corev1.Probe{ProbeHandler: httpGet(intstr.FromString("nope"))}, false, "spec.containers[0].livenessProbe.httpGet.port"},
		{"empty exec", corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}, false, "spec.containers[0].livenessProbe.exec.command"},
		{"negative delay", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), InitialDelaySeconds: -1}, false, "spec.containers[0].livenessProbe.initialDelaySeconds"},
		{"negative failure threshold", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), FailureThreshold: -2}, false, "spec.containers[0].livenessProbe.failureThreshold"},
		{"liveness success 2", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), SuccessThreshold: 2}, false, "spec.containers[0].livenessProbe.successThreshold"},
		{"grace 0", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), TerminationGracePeriodSeconds: &grace}, false, "spec.containers[0].livenessProbe.terminationGracePeriodSeconds"},
		{"grace on readiness", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(80)), TerminationGracePeriodSeconds: &grace}, true, "spec.containers[0].readinessProbe.terminationGracePeriodSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.probe
			errs := Pod(podWithProbe(&p, tc.readiness))
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.wantField {
					return
				}
			}
			t.Fatalf("want an error on %s, got %v", tc.wantField, errs)
		})
	}
}

func TestProbeDefaults(t *testing.T) {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	pod := podWithProbe(p, false)
	got := pod.Spec.Containers[0].LivenessProbe
	if got.PeriodSeconds != 10 || got.TimeoutSeconds != 1 || got.SuccessThreshold != 1 || got.FailureThreshold != 3 ||
		got.HTTPGet.Path != "/" || got.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Fatalf("probe defaults: %+v", got)
	}
}

func TestServiceAndNames(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "1bad"}, Spec: corev1.ServiceSpec{Type: "Weird",
		Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP"}, {Port: 0, Protocol: "XTP"}}}}
	defaults.Service(svc)
	var fields []string
	for _, e := range Service(svc) {
		fields = append(fields, e.Field)
	}
	got := strings.Join(fields, " ")
	for _, want := range []string{"metadata.name", "spec.type", "spec.ports[0].name", "spec.ports[1].port", "spec.ports[1].protocol"} {
		if !strings.Contains(got, want) {
			t.Fatalf("service errors %q lack %s", got, want)
		}
	}
	if errs := Namespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Has.Dots"}}); len(errs) == 0 {
		t.Fatal("namespace names are DNS-1123 labels")
	}
}
