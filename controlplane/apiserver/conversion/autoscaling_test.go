package conversion

import (
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
)

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// fullV2 sets every v2 field, the cpu utilization metric last (v1 puts it back after the others) and
// every current value the controller writes.
func fullV2() *autoscalingv2.HorizontalPodAutoscaler {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	obj := autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"}
	now := metav1.NewTime(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "kept"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 9,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("100Mi")}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU,
					Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps", Selector: sel},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: obj,
					Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("2k")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: obj,
					Metric: autoscalingv2.MetricIdentifier{Name: "avg"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("3")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: sel},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("30")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "lag"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("5")}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
					Policies:  []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}},
					Tolerance: q("50m")},
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
			},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: ptr.To[int64](3), LastScaleTime: &now, CurrentReplicas: 4, DesiredReplicas: 5,
			CurrentMetrics: []autoscalingv2.MetricStatus{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](120), AverageValue: q("600m")}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: corev1.ResourceCPU,
					Container: "app", Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](70), AverageValue: q("350m")}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "qps", Selector: sel},
					Current: autoscalingv2.MetricValueStatus{AverageValue: q("12")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{DescribedObject: obj,
					Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Current: autoscalingv2.MetricValueStatus{Value: q("1k"), AverageValue: q("250")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
					Current: autoscalingv2.MetricValueStatus{Value: q("40"), AverageValue: q("10")}}},
			},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
				{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "SucceededRescale", Message: "ok"},
				{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "DesiredWithinRange", Message: "in range"},
			},
		},
	}
}

func TestHPAV2ToV1ToV2(t *testing.T) {
	in := fullV2()
	keep := in.DeepCopy()
	v1 := &autoscalingv1.HorizontalPodAutoscaler{}
	if err := HPAToV1(in, v1); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(in, keep) {
		t.Fatal("HPAToV1 modified its input")
	}
	if v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 50 ||
		v1.Status.CurrentCPUUtilizationPercentage == nil || *v1.Status.CurrentCPUUtilizationPercentage != 120 ||
		*v1.Spec.MinReplicas != 2 || v1.Spec.MaxReplicas != 9 || v1.Spec.ScaleTargetRef.Name != "web" || v1.Status.DesiredReplicas != 5 ||
		v1.Annotations["note"] != "kept" {
		t.Errorf("v1 fields: %+v %+v", v1.Spec, v1.Status)
	}
	// upstream's shape: the internal type marshalled, Go field names, nulls for unset fields
	if got, want := v1.Annotations[BehaviorSpecsAnnotation], `{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max",`+
		`"Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":"50m"},"ScaleDown":{"StabilizationWindowSeconds":null,`+
		`"SelectPolicy":"Min","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}`; got != want {
		t.Errorf("behavior annotation\n got %s\nwant %s", got, want)
	}
	if got, want := v1.Annotations[ConditionsAnnotation], `[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-12-02T04:00:00Z",`+
		`"reason":"SucceededRescale","message":"ok"},{"type":"ScalingLimited","status":"False","lastTransitionTime":"2026-12-02T04:00:00Z",`+
		`"reason":"DesiredWithinRange","message":"in range"}]`; got != want {
		t.Errorf("conditions annotation\n got %s\nwant %s", got, want)
	}
	if got, want := v1.Annotations[MetricSpecsAnnotation], `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}},{"type":"Con`; !strings.HasPrefix(got, want) {
		t.Errorf("metrics annotation %s, want it to start %s", got, want)
	}
	back := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := HPAFromV1(v1, back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back, keep) {
		t.Errorf("v2 -> v1 -> v2 lost something:\n%s", diff.Diff(keep, back))
	}
	// and again: the v1 form is stable
	again := &autoscalingv1.HorizontalPodAutoscaler{}
	if err := HPAToV1(back, again); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(again, v1) {
		t.Errorf("v1 -> v2 -> v1 of a converted object:\n%s", diff.Diff(v1, again))
	}
}

func TestHPAV2ToV1CPUOrderAndEmpty(t *testing.T) {
	// upstream's rule: the cpu utilization target comes back after the other metrics
	in := fullV2()
	in.Spec.Metrics = append(in.Spec.Metrics[len(in.Spec.Metrics)-1:], in.Spec.Metrics[:len(in.Spec.Metrics)-1]...)
	v1 := &autoscalingv1.HorizontalPodAutoscaler{}
	back := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := HPAToV1(in, v1); err != nil {
		t.Fatal(err)
	}
	if err := HPAFromV1(v1, back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back.Spec.Metrics, fullV2().Spec.Metrics) {
		t.Errorf("metrics:\n%s", diff.Diff(fullV2().Spec.Metrics, back.Spec.Metrics))
	}

	// a v2 object with only the cpu target and nothing else carries no annotation in v1
	plain := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		MaxReplicas: 3, Metrics: fullV2().Spec.Metrics[7:]}}
	v1 = &autoscalingv1.HorizontalPodAutoscaler{}
	if err := HPAToV1(plain, v1); err != nil {
		t.Fatal(err)
	}
	if v1.Annotations != nil || *v1.Spec.TargetCPUUtilizationPercentage != 50 {
		t.Errorf("plain v1: annotations %v, target %v", v1.Annotations, v1.Spec.TargetCPUUtilizationPercentage)
	}
}

func TestHPAV1ToV2ToV1(t *testing.T) {
	in := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"note": "kept"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas: ptr.To[int32](1), MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](40)},
	}
	v2 := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := HPAFromV1(in, v2); err != nil {
		t.Fatal(err)
	}
	if len(v2.Spec.Metrics) != 1 || !isCPUUtilization(v2.Spec.Metrics[0]) || *v2.Spec.Metrics[0].Resource.Target.AverageUtilization != 40 || v2.Spec.Behavior != nil {
		t.Errorf("v2 spec %+v", v2.Spec)
	}
	back := &autoscalingv1.HorizontalPodAutoscaler{}
	if err := HPAToV1(v2, back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back, in) {
		t.Errorf("v1 -> v2 -> v1:\n%s", diff.Diff(in, back))
	}

	// no target, no other metrics: cpu at 80% in v2, which v1 then shows
	in.Spec.TargetCPUUtilizationPercentage = nil
	in.Status = autoscalingv1.HorizontalPodAutoscalerStatus{CurrentReplicas: 1, CurrentCPUUtilizationPercentage: ptr.To[int32](33)}
	if err := HPAFromV1(in, v2); err != nil {
		t.Fatal(err)
	}
	if len(v2.Spec.Metrics) != 1 || *v2.Spec.Metrics[0].Resource.Target.AverageUtilization != DefaultCPUUtilization ||
		len(v2.Status.CurrentMetrics) != 1 || *v2.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 33 {
		t.Errorf("defaulted v2: %+v %+v", v2.Spec, v2.Status)
	}
	if err := HPAToV1(v2, back); err != nil {
		t.Fatal(err)
	}
	if *back.Spec.TargetCPUUtilizationPercentage != 80 || *back.Status.CurrentCPUUtilizationPercentage != 33 || back.Annotations["note"] != "kept" {
		t.Errorf("v1 after default: %+v %+v", back.Spec, back.Status)
	}
}

func TestHPAFromV1Annotations(t *testing.T) {
	// annotations as kube-apiserver writes them: other metrics, Go-keyed behavior; a broken one is ignored and dropped
	in := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{
		MetricSpecsAnnotation:   `[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]`,
		BehaviorSpecsAnnotation: `{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":null,"Policies":null,"Tolerance":null}}`,
		ConditionsAnnotation:    `not json`,
	}}, Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 2, TargetCPUUtilizationPercentage: ptr.To[int32](70)}}
	v2 := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := HPAFromV1(in, v2); err != nil {
		t.Fatal(err)
	}
	if len(v2.Spec.Metrics) != 2 || v2.Spec.Metrics[0].Pods == nil || v2.Spec.Metrics[0].Pods.Target.AverageValue.String() != "10" ||
		v2.Spec.Metrics[0].Pods.Target.Type != autoscalingv2.AverageValueMetricType || *v2.Spec.Metrics[1].Resource.Target.AverageUtilization != 70 {
		t.Errorf("metrics %+v", v2.Spec.Metrics)
	}
	if b := v2.Spec.Behavior; b == nil || b.ScaleUp != nil || b.ScaleDown == nil || *b.ScaleDown.StabilizationWindowSeconds != 60 {
		t.Errorf("behavior %+v", b)
	}
	if v2.Annotations != nil || v2.Status.Conditions != nil || len(in.Annotations) != 3 {
		t.Errorf("annotations %v, conditions %v (input annotations %d)", v2.Annotations, v2.Status.Conditions, len(in.Annotations))
	}
}

func TestRegisterAutoscalingLists(t *testing.T) {
	s := runtime.NewScheme()
	if err := RegisterAutoscaling(s); err != nil {
		t.Fatal(err)
	}
	list := &autoscalingv2.HorizontalPodAutoscalerList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []autoscalingv2.HorizontalPodAutoscaler{*fullV2()}}
	v1 := &autoscalingv1.HorizontalPodAutoscalerList{}
	if err := s.Convert(list, v1, nil); err != nil {
		t.Fatal(err)
	}
	back := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := s.Convert(v1, back, nil); err != nil {
		t.Fatal(err)
	}
	if v1.ResourceVersion != "9" || len(v1.Items) != 1 || *v1.Items[0].Spec.TargetCPUUtilizationPercentage != 50 || !apiequality.Semantic.DeepEqual(back, list) {
		t.Errorf("list round trip:\n%s", diff.Diff(list, back))
	}
}
