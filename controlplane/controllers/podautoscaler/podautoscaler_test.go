package podautoscaler

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	fakescale "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeMetrics serves PodMetrics lists from items, filtered by namespace and label selector.
type fakeMetrics struct {
	items []metricsv1beta1.PodMetrics
}

func (f *fakeMetrics) PodMetricses(ns string) metricsclient.PodMetricsInterface {
	return &fakePodMetrics{f: f, ns: ns}
}

type fakePodMetrics struct {
	metricsclient.PodMetricsInterface
	f  *fakeMetrics
	ns string
}

func (p *fakePodMetrics) List(_ context.Context, opts metav1.ListOptions) (*metricsv1beta1.PodMetricsList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	out := &metricsv1beta1.PodMetricsList{}
	for _, m := range p.f.items {
		if m.Namespace == p.ns && sel.Matches(labels.Set(m.Labels)) {
			out.Items = append(out.Items, m)
		}
	}
	return out, nil
}

// usage is a PodMetrics of pod with one container "app" using cpu (and "side" when side is set).
func usage(name, cpu string, side string) metricsv1beta1.PodMetrics {
	m := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Timestamp: metav1.NewTime(t0), Window: metav1.Duration{Duration: 15 * time.Second},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}
	if side != "" {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: "side", Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(side)}})
	}
	return m
}

// pod is a Running, Ready (for 10 min) pod of app=web requesting cpu in container "app".
func pod(name, request string, mutate ...func(*v1.Pod)) *v1.Pod {
	start := metav1.NewTime(t0.Add(-10 * time.Minute))
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(request)}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &start,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: start}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func lister(t *testing.T, pods ...*v1.Pod) corelisters.PodLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(idx)
}

func newCalc(t *testing.T, metrics []metricsv1beta1.PodMetrics, pods ...*v1.Pod) *calculator {
	return &calculator{metrics: &fakeMetrics{items: metrics}, pods: lister(t, pods...), cpuInitializationPeriod: 5 * time.Minute,
		delayOfInitialReadinessStatus: 30 * time.Second, now: func() time.Time { return t0 }}
}

var (
	web = labels.SelectorFromSet(labels.Set{"app": "web"})
	tol = tolerances{down: 0.1, up: 0.1}
)

func TestUtilizationReplicas(t *testing.T) {
	pending := func(p *v1.Pod) { p.Status.Phase = v1.PodPending }
	deleted := func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	justStarted := func(p *v1.Pod) {
		// started 1 min ago, ready 5 s before the sample: the sample's window covers its start-up
		p.Status.StartTime = ptr.To(metav1.NewTime(t0.Add(-time.Minute)))
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-5 * time.Second))
	}
	for _, tc := range []struct {
		name        string
		current     int32
		metrics     []metricsv1beta1.PodMetrics
		pods        []*v1.Pod
		container   string
		want        int32
		utilization int32
		err         string
	}{
		{name: "scale up by the ratio", current: 2, metrics: []metricsv1beta1.PodMetrics{usage("a", "200m", ""), usage("b", "200m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m")}, want: 8, utilization: 200},
		{name: "within the 0.1 tolerance", current: 2, metrics: []metricsv1beta1.PodMetrics{usage("a", "52m", ""), usage("b", "54m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m")}, want: 2, utilization: 53},
		{name: "scale down", current: 4, metrics: []metricsv1beta1.PodMetrics{usage("a", "10m", ""), usage("b", "10m", ""), usage("c", "10m", ""), usage("d", "10m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m"), pod("d", "100m")}, want: 1, utilization: 10},
		// a: 200%; c has no metric and counts 0 on a scale-up: 400m/300m = 133% → 2.66 x 3 pods
		{name: "missing pod counts zero on a scale-up", current: 3, metrics: []metricsv1beta1.PodMetrics{usage("a", "200m", ""), usage("b", "200m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m")}, want: 8, utilization: 200},
		// 10%; c counts its whole request on a scale-down: 120m/300m = 40% → 0.8 x 3 = 3 (no change)
		{name: "missing pod counts its request on a scale-down", current: 3, metrics: []metricsv1beta1.PodMetrics{usage("a", "10m", ""), usage("b", "10m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m")}, want: 3, utilization: 10},
		// the pending pod counts zero: 200m/200m = 100% → 2 x 2 pods = 4 rather than 4 x 1
		{name: "unready pod counts zero on a scale-up", current: 2, metrics: []metricsv1beta1.PodMetrics{usage("a", "200m", ""), usage("b", "900m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m", pending)}, want: 4, utilization: 200},
		{name: "initialising cpu sample is unready", current: 2, metrics: []metricsv1beta1.PodMetrics{usage("a", "200m", ""), usage("b", "900m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m", justStarted)}, want: 4, utilization: 200},
		{name: "deleted pod is ignored", current: 2, metrics: []metricsv1beta1.PodMetrics{usage("a", "100m", ""), usage("b", "900m", "")},
			pods: []*v1.Pod{pod("a", "100m"), pod("b", "100m", deleted)}, want: 2, utilization: 100},
		{name: "container resource counts that container only", current: 1, container: "app",
			metrics: []metricsv1beta1.PodMetrics{usage("a", "100m", "900m")}, pods: []*v1.Pod{pod("a", "100m")}, want: 2, utilization: 100},
		{name: "no metrics", current: 1, pods: []*v1.Pod{pod("a", "100m")}, err: "unable to get metrics for resource cpu: no metrics returned from resource metrics API"},
		{name: "no pods", current: 1, metrics: []metricsv1beta1.PodMetrics{usage("a", "100m", "")}, err: "no pods returned by selector while calculating replica count"},
		{name: "missing request", current: 1, metrics: []metricsv1beta1.PodMetrics{usage("a", "100m", "")},
			pods: []*v1.Pod{pod("a", "100m", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = nil })}, err: "missing request for cpu in container app of Pod a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCalc(t, tc.metrics, tc.pods...)
			got, util, _, _, err := c.utilizationReplicas(context.Background(), tc.current, 50, v1.ResourceCPU, tol, "ns", web, tc.container)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || util != tc.utilization {
				t.Fatalf("replicas, utilization = %d, %d; want %d, %d", got, util, tc.want, tc.utilization)
			}
		})
	}
}

func TestAverageValueReplicas(t *testing.T) {
	c := newCalc(t, []metricsv1beta1.PodMetrics{usage("a", "300m", ""), usage("b", "300m", "")}, pod("a", "1"), pod("b", "1"))
	got, avg, _, err := c.averageValueReplicas(context.Background(), 2, 100, v1.ResourceCPU, tol, "ns", web, "")
	if err != nil || got != 6 || avg != 300 {
		t.Fatalf("replicas %d avg %d err %v; want 6, 300m", got, avg, err)
	}
	// a missing pod counts the target on a scale-down: (50+50+100)/3 = 66m → 0.66 x 3 = 2
	c = newCalc(t, []metricsv1beta1.PodMetrics{usage("a", "50m", ""), usage("b", "50m", "")}, pod("a", "1"), pod("b", "1"), pod("c", "1"))
	if got, _, _, err = c.averageValueReplicas(context.Background(), 3, 100, v1.ResourceCPU, tol, "ns", web, ""); err != nil || got != 2 {
		t.Fatalf("replicas %d err %v; want 2", got, err)
	}
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestNormalizeWithoutBehavior(t *testing.T) {
	clk := &clock{now: t0}
	h := newHistory(5*time.Minute, clk.Now)
	h.initial("k", 5)
	// a lower recommendation within the 5 min window keeps the highest one
	l := h.normalize("k", 5, 2, 1, 10)
	if l.replicas != 5 || l.ableReason != "ScaleDownStabilized" {
		t.Fatalf("got %+v, want 5 ScaleDownStabilized", l)
	}
	clk.now = t0.Add(6 * time.Minute)
	if l = h.normalize("k", 5, 2, 1, 10); l.replicas != 2 || l.ableReason != "ReadyForNewScale" || l.limitReason != "DesiredWithinRange" || l.limited {
		t.Fatalf("after the window got %+v, want 2", l)
	}
	// one step up is at most max(2 x current, 4)
	if l = h.normalize("k", 1, 10, 1, 10); l.replicas != 4 || l.limitReason != "ScaleUpLimit" || !l.limited {
		t.Fatalf("got %+v, want 4 ScaleUpLimit", l)
	}
	if l = h.normalize("k", 8, 20, 1, 10); l.replicas != 10 || l.limitReason != "TooManyReplicas" {
		t.Fatalf("got %+v, want 10 TooManyReplicas", l)
	}
	clk.now = t0.Add(20 * time.Minute)
	if l = h.normalize("k", 3, 1, 2, 10); l.replicas != 2 || l.limitReason != "TooFewReplicas" {
		t.Fatalf("got %+v, want 2 TooFewReplicas", l)
	}
}

func rules(window int32, sel autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: &sel, Policies: policies}
}

func TestNormalizeWithBehavior(t *testing.T) {
	clk := &clock{now: t0}
	h := newHistory(5*time.Minute, clk.Now)
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: rules(0, autoscalingv2.MaxChangePolicySelect, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}),
		ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect,
			autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60},
			autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}),
	}
	// one pod per minute up
	l := h.normalizeWithBehavior("k", b, 2, 5, 1, 10)
	if l.replicas != 3 || l.limitReason != "ScaleUpLimit" || !l.limited {
		t.Fatalf("got %+v, want 3 ScaleUpLimit", l)
	}
	h.recordScale("k", b, 2, 3)
	clk.now = t0.Add(10 * time.Second)
	if l = h.normalizeWithBehavior("k", b, 3, 5, 1, 10); l.replicas != 3 {
		t.Fatalf("within the period got %+v, want 3", l)
	}
	clk.now = t0.Add(61 * time.Second)
	if l = h.normalizeWithBehavior("k", b, 3, 5, 1, 10); l.replicas != 4 {
		t.Fatalf("next period got %+v, want 4", l)
	}
	// down: Max selects the larger change of 50% and 1 pod: 8 → 4
	clk.now = t0.Add(10 * time.Minute)
	if l = h.normalizeWithBehavior("k", b, 8, 1, 1, 10); l.replicas != 4 || l.limitReason != "ScaleDownLimit" {
		t.Fatalf("down got %+v, want 4 ScaleDownLimit", l)
	}
	// Min selects the smaller: 8 → 7
	b.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MinChangePolicySelect)
	clk.now = t0.Add(20 * time.Minute)
	if l = h.normalizeWithBehavior("k", b, 8, 1, 1, 10); l.replicas != 7 {
		t.Fatalf("down Min got %+v, want 7", l)
	}
	// Disabled: no scale-down at all
	b.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.DisabledPolicySelect)
	clk.now = t0.Add(30 * time.Minute)
	if l = h.normalizeWithBehavior("k", b, 8, 1, 1, 10); l.replicas != 8 {
		t.Fatalf("down Disabled got %+v, want 8", l)
	}
	// a scale-up window keeps the lowest recommendation of the window
	b.ScaleUp.StabilizationWindowSeconds = ptr.To[int32](120)
	h2 := newHistory(5*time.Minute, clk.Now)
	h2.initial("k", 2)
	clk.now = clk.now.Add(10 * time.Second)
	if l = h2.normalizeWithBehavior("k", b, 2, 6, 1, 10); l.replicas != 2 || l.ableReason != "ScaleUpStabilized" {
		t.Fatalf("up window got %+v, want 2 ScaleUpStabilized", l)
	}
	// an unset scale-down window is the controller's 5 min
	b.ScaleDown.StabilizationWindowSeconds = nil
	b.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
	h3 := newHistory(5*time.Minute, clk.Now)
	h3.initial("k", 6)
	clk.now = clk.now.Add(4 * time.Minute)
	if l = h3.normalizeWithBehavior("k", b, 6, 1, 1, 10); l.replicas != 6 || l.ableReason != "ScaleDownStabilized" {
		t.Fatalf("default down window got %+v, want 6", l)
	}
}

// mapper is a static RESTMapper with the Reset the controller calls.
type mapper struct{ meta.RESTMapper }

func (mapper) Reset() {}

// harness is a controller over fakes: a Deployment "web" of replicas whose scale selects app=web.
type harness struct {
	c       *Controller
	client  *fake.Clientset
	scales  *fakescale.FakeScaleClient
	updated []int32
}

func newHarness(t *testing.T, replicas int32, hpa *autoscalingv2.HorizontalPodAutoscaler, metrics []metricsv1beta1.PodMetrics, pods ...*v1.Pod) *harness {
	client := fake.NewClientset(hpa)
	factory := informers.NewSharedInformerFactory(client, 0)
	rm := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	rm.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	h := &harness{client: client, scales: &fakescale.FakeScaleClient{}}
	current := replicas
	h.scales.AddReactor("get", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: autoscalingv1.ScaleSpec{Replicas: current}, Status: autoscalingv1.ScaleStatus{Replicas: current, Selector: "app=web"}}, nil
	})
	h.scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		h.updated = append(h.updated, sc.Spec.Replicas)
		current = sc.Spec.Replicas
		return true, sc, nil
	})
	c, err := New(client, factory, h.scales, mapper{rm}, &fakeMetrics{items: metrics}, Options{Now: func() time.Time { return t0 }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	h.c = c
	return h
}

func (h *harness) reconcile(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	err := h.c.reconcileAutoscaler(context.Background(), hpa.DeepCopy(), "ns/"+hpa.Name)
	got, gerr := h.client.AutoscalingV2().HorizontalPodAutoscalers("ns").Get(context.Background(), hpa.Name, metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil {
		t.Logf("reconcile: %v", err)
	}
	return got
}

func cpuHPA(maxReplicas int32, extra ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: maxReplicas,
			Metrics: append([]autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}}, extra...),
		}}
}

func condition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range h.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + " " + c.Reason
		}
	}
	return "<none>"
}

func TestReconcileScalesUpToMax(t *testing.T) {
	hpa := cpuHPA(5)
	h := newHarness(t, 2, hpa, []metricsv1beta1.PodMetrics{usage("a", "200m", ""), usage("b", "200m", "")}, pod("a", "100m"), pod("b", "100m"))
	got := h.reconcile(t, hpa)
	if len(h.updated) != 1 || h.updated[0] != 4 {
		// 8 wanted, at most max(2 x 2, 4) = 4 in one step
		t.Fatalf("scale updates %v, want [4]", h.updated)
	}
	s := got.Status
	if s.CurrentReplicas != 2 || s.DesiredReplicas != 4 || s.LastScaleTime == nil || !s.LastScaleTime.Time.Equal(t0) {
		t.Fatalf("status %+v", s)
	}
	if len(s.CurrentMetrics) != 1 || s.CurrentMetrics[0].Resource == nil || *s.CurrentMetrics[0].Resource.Current.AverageUtilization != 200 ||
		s.CurrentMetrics[0].Resource.Current.AverageValue.String() != "200m" {
		t.Fatalf("currentMetrics %+v", s.CurrentMetrics)
	}
	for ct, want := range map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
		autoscalingv2.AbleToScale: "True SucceededRescale", autoscalingv2.ScalingActive: "True ValidMetricFound", autoscalingv2.ScalingLimited: "True ScaleUpLimit",
	} {
		if c := condition(got, ct); c != want {
			t.Errorf("%s = %s, want %s", ct, c, want)
		}
	}
	// next pass from 4: 8 wanted, clamped to maxReplicas 5
	got = h.reconcile(t, got)
	if h.updated[len(h.updated)-1] != 5 || condition(got, autoscalingv2.ScalingLimited) != "True TooManyReplicas" || got.Status.DesiredReplicas != 5 {
		t.Fatalf("updates %v, status %+v", h.updated, got.Status)
	}
}

func TestReconcileCustomMetricsUnavailable(t *testing.T) {
	hpa := cpuHPA(5)
	hpa.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "requests"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}}
	h := newHarness(t, 2, hpa, nil, pod("a", "100m"))
	got := h.reconcile(t, hpa)
	if len(h.updated) != 0 {
		t.Fatalf("scaled %v without metrics", h.updated)
	}
	if c := condition(got, autoscalingv2.ScalingActive); c != "False FailedGetPodsMetric" {
		t.Fatalf("ScalingActive = %s", c)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && !strings.Contains(c.Message, "unable to get metric requests") {
			t.Fatalf("message %q", c.Message)
		}
	}
	if got.Status.CurrentReplicas != 2 {
		t.Fatalf("currentReplicas %d", got.Status.CurrentReplicas)
	}
}

func TestReconcileUnknownKind(t *testing.T) {
	hpa := cpuHPA(5)
	hpa.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
	h := newHarness(t, 2, hpa, nil)
	got := h.reconcile(t, hpa)
	if c := condition(got, autoscalingv2.AbleToScale); c != "False FailedGetScale" {
		t.Fatalf("AbleToScale = %s", c)
	}
}

func TestReconcileClampsToMinWithoutMetrics(t *testing.T) {
	hpa := cpuHPA(5)
	hpa.Spec.MinReplicas = ptr.To[int32](3)
	h := newHarness(t, 1, hpa, nil)
	got := h.reconcile(t, hpa)
	if len(h.updated) != 1 || h.updated[0] != 3 || got.Status.DesiredReplicas != 3 {
		t.Fatalf("updates %v status %+v", h.updated, got.Status)
	}
}
