// Package podautoscaler is the horizontal-pod-autoscaler controller: every 15 s it reads each
// autoscaling/v2 HorizontalPodAutoscaler's target through its /scale subresource (any kind with one:
// Deployments, ReplicaSets, StatefulSets, ReplicationControllers, custom resources), computes the
// replica count from Resource and ContainerResource metrics of metrics.k8s.io/v1beta1 PodMetrics with
// upstream's replica calculator (k8s.io/kubernetes pkg/controller/podautoscaler: 0.1 tolerance,
// missing and unready pods), stabilizes and limits it (spec.behavior, or upstream's rules without
// it), writes the scale and the status (currentReplicas, desiredReplicas, currentMetrics,
// lastScaleTime, conditions AbleToScale, ScalingActive, ScalingLimited) and records events.
//
// Pods, Object and External metrics need the custom and external metrics APIs, which nodekit does not
// serve: such a metric fails as upstream's does when those APIs are missing (ScalingActive False with
// reason FailedGetPodsMetric, FailedGetObjectMetric or FailedGetExternalMetric, and a Warning event).
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Options tune the controller; zero values take kube-controller-manager's defaults.
type Options struct {
	// SyncPeriod between two reconciliations of one autoscaler (--horizontal-pod-autoscaler-sync-period, 15 s).
	SyncPeriod time.Duration
	// Tolerance: no scaling while the usage ratio is within 1±Tolerance (0.1).
	Tolerance float64
	// DownscaleStabilization is the scale-down window when spec.behavior sets none (5 min).
	DownscaleStabilization time.Duration
	// CPUInitializationPeriod (5 min) and InitialReadinessDelay (30 s): see the replica calculator.
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 15 * time.Second
	}
	if o.Tolerance <= 0 {
		o.Tolerance = 0.1
	}
	if o.DownscaleStabilization <= 0 {
		o.DownscaleStabilization = 5 * time.Minute
	}
	if o.CPUInitializationPeriod <= 0 {
		o.CPUInitializationPeriod = 5 * time.Minute
	}
	if o.InitialReadinessDelay <= 0 {
		o.InitialReadinessDelay = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Mapper finds the resources of a scale target's group and kind; Reset forgets what it cached (a
// discovery-based restmapper.DeferredDiscoveryRESTMapper).
type Mapper interface {
	meta.RESTMapper
	Reset()
}

// Controller is the horizontal-pod-autoscaler controller.
type Controller struct {
	client   kubernetes.Interface
	hpas     autoscalinglisters.HorizontalPodAutoscalerLister
	scales   scale.ScalesGetter
	mapper   Mapper
	calc     *calculator
	history  *history
	opts     Options
	recorder *events.Recorder
	*workloop.Loop
}

// New registers the controller on factory's HorizontalPodAutoscaler and Pod informers. scales reads
// and writes targets' /scale, mapper resolves their kinds, metrics lists PodMetrics.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, scales scale.ScalesGetter, mapper Mapper,
	metrics metricsclient.PodMetricsesGetter, opts Options, log *slog.Logger) (*Controller, error) {
	opts.setDefaults()
	c := &Controller{
		client: client, hpas: factory.Autoscaling().V2().HorizontalPodAutoscalers().Lister(),
		scales: scales, mapper: mapper, opts: opts,
		calc: &calculator{metrics: metrics, pods: factory.Core().V1().Pods().Lister(),
			cpuInitializationPeriod: opts.CPUInitializationPeriod, delayOfInitialReadinessStatus: opts.InitialReadinessDelay, now: opts.Now},
		history:  newHistory(opts.DownscaleStabilization, opts.Now),
		recorder: events.New(client, "horizontal-pod-autoscaler"),
	}
	c.Loop = workloop.New("horizontal-pod-autoscaler", c.reconcile, log)
	// a spec change is reconciled at once; the controller's own status writes wait for the next period
	if _, err := factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.Enqueue,
		UpdateFunc: func(o, n any) {
			oh, ok1 := o.(*autoscalingv2.HorizontalPodAutoscaler)
			nh, ok2 := n.(*autoscalingv2.HorizontalPodAutoscaler)
			if ok1 && ok2 && oh.Generation == nh.Generation {
				c.AddAfter(workloop.KeyOf(nh.Namespace, nh.Name), c.opts.SyncPeriod)
				return
			}
			c.Enqueue(n)
		},
		DeleteFunc: c.Enqueue,
	}); err != nil {
		return nil, err
	}
	factory.Core().V1().Pods().Informer()
	return c, nil
}

// Run starts the event recorder and the workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	c.Loop.Run(ctx, workers)
}

// reconcile runs one pass for key and queues the next one a sync period later. Failures are
// reported in the status and events and retried at the next period, as upstream's.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	hpa, err := c.hpas.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	defer c.AddAfter(key, c.opts.SyncPeriod)
	if err := c.reconcileAutoscaler(ctx, hpa.DeepCopy(), key); err != nil {
		c.Log().Info("autoscaler not reconciled", "hpa", key, "err", err)
	}
	return nil
}

// errStatus marks an error already reported in the status.
var errStatus = errors.New("reported in status")

func (c *Controller) reconcileAutoscaler(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string) error {
	old := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	failGetScale := func(err error) error {
		c.recorder.Event(hpa, v1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		return errors.Join(fmt.Errorf("scale of %s: %w", reference, err), c.updateStatusIfNeeded(ctx, old, hpa))
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return failGetScale(err)
	}
	mappings, err := c.mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		c.mapper.Reset() // a kind added since (a new CRD) is found next time
		return failGetScale(err)
	}
	sc, targetGR, err := c.scaleFor(ctx, hpa.Namespace, ref.Name, mappings)
	if err != nil {
		return failGetScale(err)
	}
	setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := sc.Spec.Replicas
	c.history.initial(key, current)
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	var (
		statuses []autoscalingv2.MetricStatus
		desired  int32
		reason   string
		rescale  = true
	)
	switch {
	case current == 0:
		desired, rescale = 0, false
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > hpa.Spec.MaxReplicas:
		reason, desired = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas
	case current < minReplicas:
		reason, desired = "Current number of replicas below Spec.MinReplicas", minReplicas
	default:
		proposal, metric, sts, err := c.replicasForMetrics(ctx, hpa, sc)
		statuses = sts
		if err != nil && proposal == -1 {
			hpa.Status.CurrentReplicas, hpa.Status.CurrentMetrics = current, statuses
			c.recorder.Event(hpa, v1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return errors.Join(fmt.Errorf("desired replicas of %s: %w", reference, err), c.updateStatusIfNeeded(ctx, old, hpa))
		}
		desired = proposal
		if desired > current {
			reason = metric + " above target"
		} else if desired < current {
			reason = "All metrics below target"
		}
		var l limits
		if b := behaviorRules(hpa.Spec.Behavior); b == nil {
			l = c.history.normalize(key, current, desired, minReplicas, hpa.Spec.MaxReplicas)
		} else {
			l = c.history.normalizeWithBehavior(key, b, current, desired, minReplicas, hpa.Spec.MaxReplicas)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, l.ableReason, "%s", l.ableMessage)
		limited := v1.ConditionFalse
		if l.limited {
			limited = v1.ConditionTrue
		}
		setCondition(hpa, autoscalingv2.ScalingLimited, limited, l.limitReason, "%s", l.limitMessage)
		desired = l.replicas
		rescale = desired != current
	}
	if rescale {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sc.Spec.Replicas = desired
			_, err := c.scales.Scales(hpa.Namespace).Update(ctx, targetGR, sc, metav1.UpdateOptions{})
			if err != nil {
				if latest, getErr := c.scales.Scales(hpa.Namespace).Get(ctx, targetGR, ref.Name, metav1.GetOptions{}); getErr == nil {
					sc = latest
				}
			}
			return err
		})
		if err != nil {
			c.recorder.Eventf(hpa, v1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err.Error())
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			hpa.Status.CurrentReplicas, hpa.Status.CurrentMetrics = current, statuses
			return errors.Join(fmt.Errorf("rescale %s: %w", reference, err), c.updateStatusIfNeeded(ctx, old, hpa))
		}
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, v1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.history.recordScale(key, behaviorRules(hpa.Spec.Behavior), current, desired)
		c.Log().Info("rescaled", "hpa", key, "target", reference, "currentReplicas", current, "desiredReplicas", desired, "reason", reason)
	} else {
		desired = current
	}
	hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas, hpa.Status.CurrentMetrics = current, desired, statuses
	hpa.Status.ObservedGeneration = &hpa.Generation
	if rescale {
		now := metav1.NewTime(c.opts.Now())
		hpa.Status.LastScaleTime = &now
	}
	return c.updateStatusIfNeeded(ctx, old, hpa)
}

// behaviorRules is spec.behavior when both its rules are set: the API server's defaulting fills them
// whenever behavior is set (package defaults), so a partial one is only a client bypassing it, and is
// treated as no behavior.
func behaviorRules(b *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	if b == nil || b.ScaleUp == nil || b.ScaleDown == nil {
		return nil
	}
	return b
}

// scaleFor gets the target's scale through the first mapping that serves one.
func (c *Controller) scaleFor(ctx context.Context, ns, name string, mappings []*meta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var first error
	for _, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.scales.Scales(ns).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, first
}

// replicasForMetrics is upstream's computeReplicasForMetrics: the largest proposal over the metrics,
// the metric that gave it, and the statuses. -1 and an error when every metric failed, or some failed
// and the others would scale down (ScalingActive then carries the first failure).
func (c *Controller) replicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale) (int32, string, []autoscalingv2.MetricStatus, error) {
	if sc.Status.Selector == "" {
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return -1, "", nil, errors.New("selector is required")
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "%s", msg)
		return -1, "", nil, errors.New(msg)
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var replicas int32
	var metric string
	invalid := 0
	var firstErr error
	var firstCond autoscalingv2.HorizontalPodAutoscalerCondition
	for i, spec := range specs {
		proposal, name, cond, err := c.replicasForMetric(ctx, hpa, spec, sc.Spec.Replicas, sel, &statuses[i])
		if err != nil {
			if invalid == 0 {
				firstErr, firstCond = err, cond
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric = proposal, name
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, len(specs), firstErr)
	}
	if invalid >= len(specs) || (invalid > 0 && replicas < sc.Spec.Replicas) {
		setCondition(hpa, firstCond.Type, firstCond.Status, firstCond.Reason, "%s", firstCond.Message)
		return -1, "", statuses, firstErr
	}
	setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
	return replicas, metric, statuses, firstErr
}

// errNoCustomMetrics is what a Pods, Object or External metric meets: nodekit serves no custom or
// external metrics API (upstream's error when the API is not registered).
var errNoCustomMetrics = errors.New("the server could not find the requested resource")

func (c *Controller) replicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, current int32,
	sel labels.Selector, status *autoscalingv2.MetricStatus) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	fail := func(reason string, err error) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
		return 0, "", c.unableToCompute(hpa, reason, err), err
	}
	tol := tolerances{down: c.opts.Tolerance, up: c.opts.Tolerance}
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		name, target, container, reason := corev1Name(spec), autoscalingv2.MetricTarget{}, "", "FailedGetResourceMetric"
		if spec.Resource != nil {
			target = spec.Resource.Target
		} else if spec.ContainerResource != nil {
			target, container, reason = spec.ContainerResource.Target, spec.ContainerResource.Container, "FailedGetContainerResourceMetric"
		}
		proposal, value, metric, err := c.resourceProposal(ctx, hpa, current, target, name, container, sel, tol)
		if err != nil {
			if container != "" {
				return fail(reason, fmt.Errorf("failed to get %s container metric value: %w", container, err))
			}
			return fail(reason, fmt.Errorf("failed to get %s resource metric value: %w", name, err))
		}
		if container != "" {
			metric = fmt.Sprintf("%s container resource utilization (percentage of request)", name)
			if target.AverageValue != nil {
				metric = fmt.Sprintf("%s resource", name)
			}
			*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: name, Container: container, Current: value}}
		} else {
			*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: name, Current: value}}
		}
		return proposal, metric, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	case autoscalingv2.PodsMetricSourceType:
		return fail("FailedGetPodsMetric", fmt.Errorf("failed to get pods metric value: unable to get metric %s: %w", spec.Pods.Metric.Name, errNoCustomMetrics))
	case autoscalingv2.ObjectMetricSourceType:
		return fail("FailedGetObjectMetric", fmt.Errorf("failed to get object metric value: unable to get metric %s: %w", spec.Object.Metric.Name, errNoCustomMetrics))
	case autoscalingv2.ExternalMetricSourceType:
		return fail("FailedGetExternalMetric", fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name, errNoCustomMetrics))
	}
	return fail("InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", spec.Type))
}

func corev1Name(spec autoscalingv2.MetricSpec) v1.ResourceName {
	if spec.Resource != nil {
		return spec.Resource.Name
	}
	if spec.ContainerResource != nil {
		return spec.ContainerResource.Name
	}
	return ""
}

// resourceProposal is upstream's computeStatusForResourceMetricGeneric.
func (c *Controller) resourceProposal(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, current int32, target autoscalingv2.MetricTarget,
	name v1.ResourceName, container string, sel labels.Selector, tol tolerances) (int32, autoscalingv2.MetricValueStatus, string, error) {
	if target.AverageValue != nil {
		proposal, raw, _, err := c.calc.averageValueReplicas(ctx, current, target.AverageValue.MilliValue(), name, tol, hpa.Namespace, sel, container)
		if err != nil {
			return 0, autoscalingv2.MetricValueStatus{}, "", fmt.Errorf("failed to get %s usage: %w", name, err)
		}
		q := quantity(name, raw)
		return proposal, autoscalingv2.MetricValueStatus{AverageValue: &q}, fmt.Sprintf("%s resource", name), nil
	}
	if target.AverageUtilization == nil {
		return 0, autoscalingv2.MetricValueStatus{}, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	proposal, pct, raw, _, err := c.calc.utilizationReplicas(ctx, current, *target.AverageUtilization, name, tol, hpa.Namespace, sel, container)
	if err != nil {
		return 0, autoscalingv2.MetricValueStatus{}, "", fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	q := quantity(name, raw)
	return proposal, autoscalingv2.MetricValueStatus{AverageUtilization: &pct, AverageValue: &q}, fmt.Sprintf("%s resource utilization (percentage of request)", name), nil
}

// quantity is a status value from milli-units: memory in binary SI (Mi), others decimal (m).
func quantity(name v1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if name == v1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

// unableToCompute records reason as a Warning event and returns the ScalingActive False condition.
func (c *Controller) unableToCompute(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	c.recorder.Event(hpa, v1.EventTypeWarning, reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: v1.ConditionFalse, Reason: reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err)}
}

func (c *Controller) updateStatusIfNeeded(ctx context.Context, old *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(old, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, v1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// setCondition sets (or adds) the condition of type t; its lastTransitionTime moves only when the
// status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, format string, args ...any) {
	var cond *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			cond = &hpa.Status.Conditions[i]
		}
	}
	if cond == nil {
		hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
		cond = &hpa.Status.Conditions[len(hpa.Status.Conditions)-1]
	}
	if cond.Status != status {
		cond.LastTransitionTime = metav1.Now()
	}
	cond.Status, cond.Reason, cond.Message = status, reason, fmt.Sprintf(format, args...)
}
