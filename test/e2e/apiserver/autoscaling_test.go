package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestHorizontalPodAutoscalerAPI checks horizontalpodautoscalers on the real API server: discovery (v2
// preferred, v1 also served, short name hpa, /status; v1 in /openapi/v3), upstream's validation message through v1, an
// object created through v1 (its defaults, other metrics and behavior in upstream's annotations) read
// through v2, its v2 status read through v1, and a v1 read-modify-write that keeps every v2 field; the
// table columns and a /status validation. (The controller acting on them: test/e2e/up assertHPA.)
func TestHorizontalPodAutoscalerAPI(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	for _, gv := range []string{"autoscaling/v2", "autoscaling/v1"} {
		l, err := c.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, r := range l.APIResources {
			found[r.Name] = true
			if r.Name == "horizontalpodautoscalers" && (!r.Namespaced || strings.Join(r.ShortNames, ",") != "hpa" || strings.Join(r.Categories, ",") != "all") {
				t.Errorf("discovery %s horizontalpodautoscalers: %+v", gv, r)
			}
		}
		if !found["horizontalpodautoscalers"] || !found["horizontalpodautoscalers/status"] {
			t.Errorf("discovery %s: %v", gv, found)
		}
	}
	groups, err := c.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "autoscaling" }); i < 0 ||
		groups.Groups[i].PreferredVersion.Version != "v2" || len(groups.Groups[i].Versions) != 2 {
		t.Errorf("autoscaling group in discovery: %+v, want v2 preferred of [v2 v1]", groups.Groups)
	}

	paths, err := c.Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := paths["apis/autoscaling/v1"]; !ok {
		t.Errorf("/openapi/v3 has no apis/autoscaling/v1 (kubectl explain, apply's field validation)")
	}

	v1hpas, hpas := c.AutoscalingV1().HorizontalPodAutoscalers("default"), c.AutoscalingV2().HorizontalPodAutoscalers("default")
	ref := autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	bad := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: ref, MinReplicas: ptr.To[int32](4), MaxReplicas: 2}}
	if _, err := v1hpas.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`") {
		t.Errorf("maxReplicas below minReplicas: %v, want 422 naming spec.maxReplicas", err)
	}
	// through v1: a cpu target, a memory metric in upstream's metrics annotation, a behavior in its behavior annotation
	created, err := v1hpas.Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
		"autoscaling.alpha.kubernetes.io/metrics":  `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]`,
		"autoscaling.alpha.kubernetes.io/behavior": `{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Min","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":30}]}}`, "note": "kept"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](70)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.MinReplicas == nil || *created.Spec.MinReplicas != 1 || *created.Spec.TargetCPUUtilizationPercentage != 70 ||
		!strings.Contains(created.Annotations["autoscaling.alpha.kubernetes.io/behavior"], `"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Min","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":30}],"Tolerance":null}`) {
		t.Errorf("created through v1: %+v %v", created.Spec, created.Annotations)
	}
	h, err := hpas.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 1 || len(h.Spec.Metrics) != 2 || h.Spec.Metrics[0].Resource == nil ||
		h.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory || h.Spec.Metrics[0].Resource.Target.AverageValue.String() != "100Mi" ||
		*h.Spec.Metrics[1].Resource.Target.AverageUtilization != 70 || h.Spec.Behavior == nil || h.Spec.Behavior.ScaleUp == nil ||
		len(h.Spec.Behavior.ScaleUp.Policies) != 2 || *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 || h.Generation != 1 ||
		len(h.Annotations) != 1 || h.Annotations["note"] != "kept" {
		t.Errorf("v1 object read through v2: %+v %v", h.Spec, h.Annotations)
	}

	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 3, CurrentMetrics: []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceMemory,
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse("50Mi"))}}},
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](120), AverageValue: ptr.To(resource.MustParse("600m"))}}}},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.Now().Rfc3339Copy(), Reason: "ReadyForNewScale", Message: "ready"}}}
	if h, err = hpas.UpdateStatus(ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1 read-modify-write of spec, then of status: v2 keeps every field v1 has none for
	old, err := v1hpas.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if old.Status.CurrentCPUUtilizationPercentage == nil || *old.Status.CurrentCPUUtilizationPercentage != 120 || old.Status.DesiredReplicas != 3 ||
		!strings.Contains(old.Annotations["autoscaling.alpha.kubernetes.io/conditions"], `"reason":"ReadyForNewScale"`) {
		t.Errorf("v2 status read through v1: %+v %v", old.Status, old.Annotations)
	}
	old.Spec.MaxReplicas = 6
	if old, err = v1hpas.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	old.Status.DesiredReplicas = 4
	if _, err = v1hpas.UpdateStatus(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := hpas.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Spec.MaxReplicas, h.Status.DesiredReplicas = 6, 4
	if !apiequality.Semantic.DeepEqual(after.Spec, h.Spec) || !apiequality.Semantic.DeepEqual(after.Status, h.Status) || after.Generation != 2 {
		t.Errorf("after v1 updates, v2 reads\n%+v\n%+v (generation %d), want\n%+v\n%+v", after.Spec, after.Status, after.Generation, h.Spec, h.Status)
	}
	if l, err := v1hpas.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || *l.Items[0].Spec.TargetCPUUtilizationPercentage != 70 {
		t.Errorf("v1 list: %v %+v", err, l)
	}

	after.Status.DesiredReplicas = -1
	if _, err := hpas.UpdateStatus(ctx, after, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.desiredReplicas") {
		t.Errorf("negative desiredReplicas: %v, want 422", err)
	}
	table := &metav1.Table{}
	if err := c.AutoscalingV2().RESTClient().Get().Namespace("default").Resource("horizontalpodautoscalers").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Into(table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if strings.Join(cols, " ") != "Name Reference Targets MinPods MaxPods Replicas Age" || len(table.Rows) != 1 {
		t.Fatalf("table columns %v, %d rows", cols, len(table.Rows))
	}
	if cells := fmt.Sprint(table.Rows[0].Cells[1:6]); cells != "[Deployment/web memory: 50Mi/100Mi, cpu: 120%/70% 1 6 2]" {
		t.Errorf("table row %v", cells)
	}
}
