package validation

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/podspec"
)

// FuzzPod decodes arbitrary JSON as a Pod, a Service and a Deployment (what a client sends the API
// server) and validates it as admission does. Properties: validation never panics, whatever the decoded
// object holds; every error names a field; and an unchanged update of a valid pod or service is allowed.
func FuzzPod(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"name":"p","namespace":"default"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
		`{"metadata":{"name":"p"},"spec":{"initContainers":[{"name":"i","image":"x","restartPolicy":"Always","startupProbe":{"exec":{"command":["true"]}}}],"containers":[{"name":"c","image":"x","ports":[{"containerPort":80,"hostPort":8080}],"livenessProbe":{"httpGet":{"port":"http"}},"env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['x']"}}},{"name":"B","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}}],"volumeMounts":[{"name":"v","mountPath":"/v","subPath":"../x"}]}],"volumes":[{"name":"v","emptyDir":{}},{"name":"w","hostPath":{"path":"/"}}]}}`,
		`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"cpu":"-1","memory":"1Ei"},"requests":{"cpu":"2"}}}],"tolerations":[{"operator":"Exists","tolerationSeconds":-5}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{}]}}}}}`,
		`{"metadata":{"name":"s"},"spec":{"type":"NodePort","selector":{"a":"b"},"ports":[{"port":80,"targetPort":"x","nodePort":30000,"protocol":"UDP"}],"clusterIP":"None"}}`,
		`{"metadata":{"name":"d"},"spec":{"replicas":-1,"selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In"}]},"template":{"metadata":{"labels":{"a":"c"}},"spec":{"containers":[]}}}}`,
		`{"spec":{"containers":[null,{}],"volumes":[{}]}}`,
		`{"spec":{"containers":[{"name":"c","lifecycle":{"preStop":{"sleep":{"seconds":-1}}},"securityContext":{"capabilities":{"add":[""]}}}]}}`,
		`{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var pod corev1.Pod
		if json.Unmarshal(data, &pod) == nil {
			podspec.Default(&pod.Spec)
			errs := Pod(&pod)
			namesFields(t, "pod", errs)
			if len(errs) == 0 {
				if up := PodUpdate(pod.DeepCopy(), &pod); len(up) != 0 {
					t.Fatalf("unchanged update of a valid pod refused: %v", up)
				}
			} else {
				namesFields(t, "pod update", PodUpdate(pod.DeepCopy(), &pod))
			}
		}
		var svc corev1.Service
		if json.Unmarshal(data, &svc) == nil {
			errs := Service(&svc)
			namesFields(t, "service", errs)
			up := ServiceUpdate(svc.DeepCopy(), &svc)
			namesFields(t, "service update", up)
			if len(errs) == 0 && len(up) != 0 {
				t.Fatalf("unchanged update of a valid service refused: %v", up)
			}
		}
		var d appsv1.Deployment
		if json.Unmarshal(data, &d) == nil {
			podspec.Default(&d.Spec.Template.Spec)
			namesFields(t, "deployment", Deployment(&d))
		}
	})
}

func namesFields(t *testing.T, what string, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" {
			t.Fatalf("%s: error without a field: %v", what, e)
		}
	}
}
