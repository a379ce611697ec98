package podautoscaler

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

const (
	// scaleUpLimitFactor and scaleUpLimitMinimum bound one step without spec.behavior: at most
	// max(2 x current, 4) replicas (upstream's guard against bogus usage reports).
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

type recommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// history is what upstream's controller keeps in memory per HorizontalPodAutoscaler (key
// "namespace/name"): recent recommendations for the stabilization windows, and recent scale events for
// the scaling policies' periods. It is lost on restart, as upstream's.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	ups, downs      map[string][]scaleEvent
	// downscaleWindow is the scale-down stabilization window when spec.behavior leaves it unset
	// (upstream's --horizontal-pod-autoscaler-downscale-stabilization, 5 min).
	downscaleWindow time.Duration
	now             func() time.Time
}

func newHistory(downscaleWindow time.Duration, now func() time.Time) *history {
	return &history{recommendations: map[string][]recommendation{}, ups: map[string][]scaleEvent{}, downs: map[string][]scaleEvent{},
		downscaleWindow: downscaleWindow, now: now}
}

// forget drops a deleted autoscaler's history.
func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.ups, key)
	delete(h.downs, key)
}

// initial records the current replica count as a recommendation when key has none (upstream's
// recordInitialRecommendation), so a fresh controller does not scale down at once.
func (h *history) initial(key string, current int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, h.now()}}
	}
}

// limits is the outcome of a normalization: the replicas and the AbleToScale and ScalingLimited
// reasons and messages upstream sets.
type limits struct {
	replicas                  int32
	ableReason, ableMessage   string
	limitReason, limitMessage string
	limited                   bool
}

// normalize is upstream's normalizeDesiredReplicas (no spec.behavior): the highest recommendation
// of the downscale window, then min/max and a scale-up of at most max(2 x current, 4).
func (h *history) normalize(key string, current, desired, minReplicas, maxReplicas int32) limits {
	stabilized := h.stabilize(key, desired)
	l := limits{ableReason: "ReadyForNewScale", ableMessage: "recommended size matches current size"}
	if stabilized != desired {
		l.ableReason, l.ableMessage = "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
	}
	l.replicas, l.limitReason, l.limitMessage = clampWithRules(current, stabilized, minReplicas, maxReplicas)
	l.limited = l.replicas != stabilized
	return l
}

// stabilize records desired and returns the largest recommendation of the downscale window.
func (h *history) stabilize(key string, desired int32) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	cutoff := now.Add(-h.downscaleWindow)
	max, reuse := desired, -1
	for i, r := range h.recommendations[key] {
		if r.at.After(cutoff) {
			max = maxInt32(max, r.replicas)
		} else {
			reuse = i
		}
	}
	h.store(key, reuse, recommendation{desired, now})
	return max
}

func (h *history) store(key string, reuse int, r recommendation) {
	if reuse >= 0 {
		h.recommendations[key][reuse] = r
	} else {
		h.recommendations[key] = append(h.recommendations[key], r)
	}
}

func clampWithRules(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	upLimit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
	maxAllowed, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		maxAllowed, reason, message = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	if desired < minReplicas {
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	}
	if desired > maxAllowed {
		return maxAllowed, reason, message
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// normalizeWithBehavior is upstream's normalizeDesiredReplicasWithBehaviors: the recommendation
// stabilized by both windows, then limited by the scaling policies of the direction and min/max.
// b's rules are the defaulted ones (package defaults); an unset scale-down window is downscaleWindow.
func (h *history) normalizeWithBehavior(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired, minReplicas, maxReplicas int32) limits {
	upWindow := time.Duration(ptrOr(b.ScaleUp.StabilizationWindowSeconds, 0)) * time.Second
	downWindow := h.downscaleWindow
	if b.ScaleDown.StabilizationWindowSeconds != nil {
		downWindow = time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second
	}
	stabilized, reason, message := h.stabilizeWithWindows(key, current, desired, upWindow, downWindow)
	l := limits{ableReason: "ReadyForNewScale", ableMessage: "recommended size matches current size"}
	if stabilized != desired {
		l.ableReason, l.ableMessage = reason, message
	}
	l.replicas, l.limitReason, l.limitMessage = h.limitByPolicies(key, b, current, stabilized, minReplicas, maxReplicas)
	l.limited = l.replicas != stabilized
	return l
}

func (h *history) stabilizeWithWindows(key string, current, desired int32, upWindow, downWindow time.Duration) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	upCutoff, downCutoff := now.Add(-upWindow), now.Add(-downWindow)
	up, down, reuse := desired, desired, -1
	for i, r := range h.recommendations[key] {
		if r.at.After(upCutoff) {
			up = minInt32(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = maxInt32(down, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			reuse = i
		}
	}
	rec := current
	if rec < up {
		rec = up
	}
	if rec > down {
		rec = down
	}
	h.store(key, reuse, recommendation{desired, now})
	if desired >= current {
		return rec, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return rec, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

func (h *history) limitByPolicies(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	switch {
	case desired > current:
		limit := max(scaleLimit(b.ScaleUp, current, h.ups[key], h.downs[key], now, true), current)
		maxAllowed, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxAllowed > limit {
			maxAllowed, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > maxAllowed {
			return maxAllowed, reason, message
		}
	case desired < current:
		limit := min(scaleLimit(b.ScaleDown, current, h.ups[key], h.downs[key], now, false), current)
		minAllowed, reason, message := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minAllowed < limit {
			minAllowed, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < minAllowed {
			return minAllowed, reason, message
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// scaleLimit is upstream's calculateScaleUpLimitWithScalingRules (up) or
// calculateScaleDownLimitWithBehaviors: per policy, the replicas at the start of its period (current
// less the changes within it) moved by the policy's pods or percent; selectPolicy Max takes the largest
// change, Min the smallest, Disabled none.
func scaleLimit(r *autoscalingv2.HPAScalingRules, current int32, ups, downs []scaleEvent, now time.Time, up bool) int32 {
	sel := autoscalingv2.MaxChangePolicySelect
	if r.SelectPolicy != nil {
		sel = *r.SelectPolicy
	}
	if sel == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// for a scale-up the largest change is the largest count; for a scale-down, the smallest
	pickLarger := (sel == autoscalingv2.MaxChangePolicySelect) == up
	result := int32(math.MinInt32)
	if !pickLarger {
		result = math.MaxInt32
	}
	for _, p := range r.Policies {
		start := current - changeWithin(p.PeriodSeconds, ups, now) + changeWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case up:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		default:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if pickLarger {
			result = maxInt32(result, proposed)
		} else {
			result = minInt32(result, proposed)
		}
	}
	return result
}

func changeWithin(periodSeconds int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// recordScale stores a rescale from prev to next for the policies' periods (only with spec.behavior,
// as upstream), reusing an event older than the direction's longest policy period.
func (h *history) recordScale(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, prev, next int32) {
	if b == nil || prev == next {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	events, rules, change := h.ups, b.ScaleUp, next-prev
	if next < prev {
		events, rules, change = h.downs, b.ScaleDown, prev-next
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = maxInt32(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	list := events[key]
	for i := range list {
		if list[i].at.Before(cutoff) {
			list[i].outdated = true
		}
	}
	e := scaleEvent{change: change, at: now}
	for i := range list {
		if list[i].outdated {
			list[i] = e
			return
		}
	}
	events[key] = append(list, e)
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func minInt32(a, b int32) int32 { return min(a, b) }
func maxInt32(a, b int32) int32 { return max(a, b) }
