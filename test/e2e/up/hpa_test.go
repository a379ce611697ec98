package up

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/test/framework/kubectl"
)

const hpaNamespace = "hpa-burn"

// startHPA creates a Deployment "burn" of one pod spinning a CPU ("while :; do :; done", request 10m,
// limit 50m: about 500% of its request) and autoscales it with `kubectl autoscale --min=1 --max=3
// --cpu-percent=50`: the flag every kubectl takes (1.37 deprecates it for --cpu=50%, which a kubectl
// older than 1.34 refuses, and the tests run the kubectl they find). assertHPA later checks the outcome, so the metrics' two scrapes and the controller's
// 15 s period overlap the test's other checks.
func (e *env) startHPA(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hpaNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "burn"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "burn", Namespace: hpaNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "burn", Image: bundled.DemoServerV1, Command: []string{"sh", "-c", "while :; do :; done"},
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
						Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}}}}}}}}
	if _, err := client.AppsV1().Deployments(hpaNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := e.kubectl("-n", hpaNamespace, "autoscale", "deployment", "burn", "--min=1", "--max=3", "--cpu-percent=50"); err != nil {
		t.Fatalf("kubectl autoscale: %v\n%s", err, out)
	}
}

// assertHPA waits for the autoscaler to scale "burn" to maxReplicas (3) and checks its status
// (currentMetrics, lastScaleTime, conditions AbleToScale/ScalingActive/ScalingLimited with upstream's
// reasons), the SuccessfulRescale event, the Deployment's replicas and `kubectl get hpa`'s columns.
func (e *env) assertHPA(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	e.waitFor(t, client, 3*time.Minute, "the autoscaler scaling burn to 3", func() (bool, string) {
		var err error
		hpa, err = client.AutoscalingV2().HorizontalPodAutoscalers(hpaNamespace).Get(ctx, "burn", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return hpa.Status.DesiredReplicas == 3 && conditionOf(hpa, autoscalingv2.ScalingLimited) == "True TooManyReplicas",
			fmt.Sprintf("%+v", hpa.Status)
	})
	s := hpa.Status
	if s.LastScaleTime == nil || len(s.CurrentMetrics) != 1 || s.CurrentMetrics[0].Resource == nil ||
		s.CurrentMetrics[0].Resource.Name != v1.ResourceCPU || s.CurrentMetrics[0].Resource.Current.AverageUtilization == nil ||
		*s.CurrentMetrics[0].Resource.Current.AverageUtilization <= 50 {
		t.Errorf("status %+v: want lastScaleTime and a cpu utilization above 50%%", s)
	}
	if c := conditionOf(hpa, autoscalingv2.AbleToScale); c != "True SucceededRescale" && c != "True ReadyForNewScale" {
		t.Errorf("AbleToScale = %s", c)
	}
	if c := conditionOf(hpa, autoscalingv2.ScalingActive); c != "True ValidMetricFound" {
		t.Errorf("ScalingActive = %s", c)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 1 || hpa.Spec.MaxReplicas != 3 {
		t.Errorf("kubectl autoscale made spec %+v", hpa.Spec)
	}
	dep, err := client.AppsV1().Deployments(hpaNamespace).Get(ctx, "burn", metav1.GetOptions{})
	if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment burn replicas %v (%v), want 3", dep.Spec.Replicas, err)
	}
	evs, err := client.CoreV1().Events(hpaNamespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "HorizontalPodAutoscaler", "reason": "SuccessfulRescale"}.String()})
	if err != nil || len(evs.Items) == 0 || !strings.HasPrefix(evs.Items[0].Message, "New size: ") {
		t.Errorf("SuccessfulRescale events: %v %v", evs, err)
	}
	// kubectl get hpa: NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE, TARGETS "cpu: <n>%/50%"
	e.waitFor(t, client, 60*time.Second, "kubectl get hpa with the current cpu target and 3 replicas", func() (bool, string) {
		out, err := e.kubectl("-n", hpaNamespace, "get", "hpa", "burn")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE" {
			return false, fmt.Sprintf("%s %v", out, err)
		}
		f := strings.Fields(lines[1]) // burn Deployment/burn cpu: 500%/50% 1 3 3 40s
		return len(f) == 8 && f[1] == "Deployment/burn" && f[2] == "cpu:" && strings.HasSuffix(f[3], "%/50%") && !strings.HasPrefix(f[3], "<unknown>") &&
			f[4] == "1" && f[5] == "3" && f[6] == "3", out
	})
	t.Logf("horizontal pod autoscaler: scaled to 3 and checked %s after the checks before it", time.Since(start).Round(100*time.Millisecond))

	// Deleting the namespace deletes the autoscaler with it (the namespace controller knows the kind).
	start = time.Now()
	if err := client.CoreV1().Namespaces().Delete(ctx, hpaNamespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, 2*time.Minute, "namespace "+hpaNamespace+" and its autoscaler deleted", func() (bool, string) {
		_, err := client.CoreV1().Namespaces().Get(ctx, hpaNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("horizontal pod autoscaler: namespace deleted in %s", time.Since(start).Round(100*time.Millisecond))
}

func conditionOf(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range h.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + " " + c.Reason
		}
	}
	return "<none>"
}

// kubectl runs kubectl 1.37 (or the one on PATH) with the admin kubeconfig.
func (e *env) kubectl(args ...string) (string, error) {
	kubeconfig := server.Config{DataDir: e.dataDir}.Paths().AdminKubeconfig
	out, err := exec.Command(kubectl.Path(), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
