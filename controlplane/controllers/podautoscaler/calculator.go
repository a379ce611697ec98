package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// podMetric is one pod's usage of a resource: milli-units (millicores; for memory, milli-bytes as
// upstream's MilliValue), sampled over window ending at timestamp.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// tolerances are the ratios around 1.0 within which no scaling happens (upstream's --horizontal-pod-
// autoscaler-tolerance, 0.1 both ways).
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool { return 1.0-t.down <= ratio && ratio <= 1.0+t.up }

// calculator is upstream's ReplicaCalculator for resource metrics: it reads metrics.k8s.io PodMetrics
// and the pods (from the informer) and proposes a replica count.
type calculator struct {
	metrics metricsclient.PodMetricsesGetter
	pods    corelisters.PodLister
	// cpuInitializationPeriod: a pod started less than this ago counts as unready for cpu unless its
	// metric was sampled a full window after it became ready (upstream default 5 min).
	cpuInitializationPeriod time.Duration
	// delayOfInitialReadinessStatus: an unready pod that turned unready within this of starting never
	// became ready and counts as unready (upstream default 30 s).
	delayOfInitialReadinessStatus time.Duration
	now                           func() time.Time
}

// resourceMetric returns each selected pod's usage of resource (of container alone when set), as
// upstream's resource metrics client: pods missing the resource in any container are left out.
func (c *calculator) resourceMetric(ctx context.Context, resource v1.ResourceName, ns string, sel labels.Selector, container string) (map[string]podMetric, time.Time, error) {
	list, err := c.metrics.PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from resource metrics API")
	}
	res := make(map[string]podMetric, len(list.Items))
	for _, m := range list.Items {
		sample := func(v int64) podMetric {
			return podMetric{timestamp: m.Timestamp.Time, window: m.Window.Duration, value: v}
		}
		if container != "" {
			for _, ct := range m.Containers {
				if ct.Name == container {
					if q, ok := ct.Usage[resource]; ok {
						res[m.Name] = sample(q.MilliValue())
					}
					break
				}
			}
			continue
		}
		sum, complete := int64(0), len(m.Containers) > 0
		for _, ct := range m.Containers {
			q, ok := ct.Usage[resource]
			if !ok {
				complete = false
				break
			}
			sum += q.MilliValue()
		}
		if complete {
			res[m.Name] = sample(sum)
		}
	}
	return res, list.Items[0].Timestamp.Time, nil
}

// utilizationReplicas is upstream's GetResourceReplicas: the replica count that brings the average
// utilization (percent of request) of resource to target, the current utilization and raw average
// (milli-units), and the metrics' timestamp.
func (c *calculator) utilizationReplicas(ctx context.Context, current, target int32, resource v1.ResourceName, tol tolerances, ns string, sel labels.Selector, container string) (int32, int32, int64, time.Time, error) {
	metrics, ts, err := c.resourceMetric(ctx, resource, ns, sel, container)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	pods, err := c.pods.Pods(ns).List(sel)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	if len(pods) == 0 {
		return 0, 0, 0, time.Time{}, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, resource)
	remove(metrics, ignored)
	remove(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, 0, time.Time{}, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(pods, container, resource)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	ratio, utilization, raw, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	upWithUnready := len(unready) > 0 && ratio > 1.0
	if !upWithUnready && len(missing) == 0 {
		if tol.within(ratio) {
			return current, utilization, raw, ts, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), utilization, raw, ts, nil
	}
	if len(missing) > 0 {
		// a missing pod uses all of its request (or the target above 100%) on a scale-down, none on a scale-up
		fallback := int64(max(100, target))
		for name := range missing {
			if ratio < 1.0 {
				metrics[name] = podMetric{value: requests[name] * fallback / 100}
			} else if ratio > 1.0 {
				metrics[name] = podMetric{}
			}
		}
	}
	if upWithUnready {
		for name := range unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, utilization, raw, time.Time{}, err
	}
	return settle(current, ratio, newRatio, len(metrics), tol), utilization, raw, ts, nil
}

// averageValueReplicas is upstream's GetRawResourceReplicas: the replica count that brings the
// average usage of resource per pod to target (milli-units), and the current average.
func (c *calculator) averageValueReplicas(ctx context.Context, current int32, target int64, resource v1.ResourceName, tol tolerances, ns string, sel labels.Selector, container string) (int32, int64, time.Time, error) {
	metrics, ts, err := c.resourceMetric(ctx, resource, ns, sel, container)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	pods, err := c.pods.Pods(ns).List(sel)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	if len(pods) == 0 {
		return 0, 0, time.Time{}, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, resource)
	remove(metrics, ignored)
	remove(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, time.Time{}, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, usage := usageRatio(metrics, target)
	upWithUnready := len(unready) > 0 && ratio > 1.0
	if !upWithUnready && len(missing) == 0 {
		if tol.within(ratio) {
			return current, usage, ts, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), usage, ts, nil
	}
	for name := range missing {
		// a missing pod uses exactly the target on a scale-down, nothing on a scale-up
		if ratio < 1.0 {
			metrics[name] = podMetric{value: target}
		} else if ratio > 1.0 {
			metrics[name] = podMetric{}
		}
	}
	if upWithUnready {
		for name := range unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	return settle(current, ratio, newRatio, len(metrics), tol), usage, ts, nil
}

// settle is the second pass of upstream's calculation, once missing and unready pods are filled in:
// no change within tolerance or when the direction flips, else ceil(newRatio * pods counted).
func settle(current int32, ratio, newRatio float64, counted int, tol tolerances) int32 {
	if tol.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current
	}
	n := int32(math.Ceil(newRatio * float64(counted)))
	if (newRatio < 1.0 && n > current) || (newRatio > 1.0 && n < current) {
		return current
	}
	return n
}

// groupPods sorts the pods as upstream: deleted and failed pods are ignored; pending pods and (for
// cpu) pods not yet ready or still initialising are unready; pods without a metric are missing.
func (c *calculator) groupPods(pods []*v1.Pod, metrics map[string]podMetric, resource v1.ResourceName) (ready int, unready, missing, ignored sets.Set[string]) {
	unready, missing, ignored = sets.New[string](), sets.New[string](), sets.New[string]()
	now := c.now()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodFailed {
			ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == v1.PodPending {
			unready.Insert(pod.Name)
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			missing.Insert(pod.Name)
			continue
		}
		if resource == v1.ResourceCPU {
			cond := readyCondition(pod)
			isUnready := false
			switch {
			case cond == nil || pod.Status.StartTime == nil:
				isUnready = true
			case pod.Status.StartTime.Add(c.cpuInitializationPeriod).After(now):
				isUnready = cond.Status == v1.ConditionFalse || metric.timestamp.Before(cond.LastTransitionTime.Add(metric.window))
			default:
				isUnready = cond.Status == v1.ConditionFalse && pod.Status.StartTime.Add(c.delayOfInitialReadinessStatus).After(cond.LastTransitionTime.Time)
			}
			if isUnready {
				unready.Insert(pod.Name)
				continue
			}
		}
		ready++
	}
	return ready, unready, missing, ignored
}

func readyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// podRequests is each pod's request of resource in milli-units: container's alone when set, else the
// sum over its containers and restartable init containers; an error names a container without one.
func podRequests(pods []*v1.Pod, container string, resource v1.ResourceName) (map[string]int64, error) {
	requests := make(map[string]int64, len(pods))
	for _, pod := range pods {
		cs := append([]v1.Container{}, pod.Spec.Containers...)
		for _, ic := range pod.Spec.InitContainers {
			if ic.RestartPolicy != nil && *ic.RestartPolicy == v1.ContainerRestartPolicyAlways {
				cs = append(cs, ic)
			}
		}
		var sum int64
		found := container == ""
		for _, ct := range cs {
			if container != "" && ct.Name != container {
				continue
			}
			q, ok := ct.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.Name, pod.Name)
			}
			sum += q.MilliValue()
			found = true
			if container != "" {
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
		}
		requests[pod.Name] = sum
	}
	return requests, nil
}

// utilizationRatio is upstream's GetResourceUtilizationRatio over the pods that have both a metric
// and a request: the ratio of utilization to target, the utilization (percent) and the raw average.
func utilizationRatio(metrics map[string]podMetric, requests map[string]int64, target int32) (float64, int32, int64, error) {
	var total, reqTotal int64
	n := 0
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		total += m.value
		reqTotal += r
		n++
	}
	if reqTotal == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization := int32(total * 100 / reqTotal)
	return float64(utilization) / float64(target), utilization, total / int64(n), nil
}

// usageRatio is upstream's GetMetricUsageRatio: the average over metrics against target.
func usageRatio(metrics map[string]podMetric, target int64) (float64, int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	usage := total / int64(len(metrics))
	return float64(usage) / float64(target), usage
}

func remove(metrics map[string]podMetric, names sets.Set[string]) {
	for name := range names {
		delete(metrics, name)
	}
}
