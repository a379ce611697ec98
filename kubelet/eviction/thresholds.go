package eviction

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names an eviction signal, as upstream's (pkg/kubelet/eviction/api).
type Signal string

// The signals nodekit observes.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// signalInfo: the node condition a signal drives, the resource it starves, and its eviction priority
// (lower first; memory before disk before PIDs, as upstream's byEvictionPriority).
var signalInfo = map[Signal]struct {
	condition v1.NodeConditionType
	resource  v1.ResourceName
	priority  int
}{
	SignalMemoryAvailable:   {v1.NodeMemoryPressure, v1.ResourceMemory, 0},
	SignalNodeFsAvailable:   {v1.NodeDiskPressure, v1.ResourceEphemeralStorage, 1},
	SignalNodeFsInodesFree:  {v1.NodeDiskPressure, resourceInodes, 1},
	SignalImageFsAvailable:  {v1.NodeDiskPressure, v1.ResourceEphemeralStorage, 1},
	SignalImageFsInodesFree: {v1.NodeDiskPressure, resourceInodes, 1},
	SignalPIDAvailable:      {v1.NodePIDPressure, resourcePIDs, 2},
}

const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// DefaultEvictionHard is upstream's evictionHard default on Linux.
var DefaultEvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// Value is a threshold amount: a quantity, or a fraction (0-1) of the signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64
}

// of returns the amount for a signal whose capacity is capacity.
func (v Value) of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * v.Percentage)
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold: the node is under pressure when Signal's available amount is
// below Value. GracePeriod 0 makes it hard (pods are killed at once, grace period 0); a soft one must
// hold for GracePeriod before pods are evicted (with at most MaxPodGracePeriodSeconds). Once met, it
// stays met until available reaches Value + MinReclaim.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  Value
}

func (t Threshold) hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	kind := "hard"
	if !t.hard() {
		kind = "soft, grace " + t.GracePeriod.String()
	}
	return fmt.Sprintf("%s<%s (%s)", t.Signal, t.Value, kind)
}

// ParseThresholds parses the KubeletConfiguration maps evictionHard, evictionSoft,
// evictionSoftGracePeriod and evictionMinimumReclaim (signal → "100Mi" or "10%", grace periods as
// durations), as upstream's ParseThresholdConfig. Every soft threshold needs a grace period and every
// grace period or minimum reclaim a threshold. Errors name the field and the signal. A value of "0%" or
// "100%" disables that signal, as upstream.
func ParseThresholds(hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	var out []Threshold
	parse := func(field string, m map[string]string, grace func(Signal) (time.Duration, error)) error {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := Signal(k)
			if _, ok := signalInfo[s]; !ok {
				return fmt.Errorf("%s: unsupported eviction signal %q", field, k)
			}
			val := strings.TrimSpace(m[k])
			if val == "0%" || val == "100%" {
				continue
			}
			v, err := parseValue(val)
			if err != nil {
				return fmt.Errorf("%s[%s]: %w", field, k, err)
			}
			g, err := grace(s)
			if err != nil {
				return err
			}
			t := Threshold{Signal: s, Value: v, GracePeriod: g}
			if r, ok := minReclaim[k]; ok {
				if t.MinReclaim, err = parseValue(r); err != nil {
					return fmt.Errorf("evictionMinimumReclaim[%s]: %w", k, err)
				}
			}
			out = append(out, t)
		}
		return nil
	}
	if err := parse("evictionHard", hard, func(Signal) (time.Duration, error) { return 0, nil }); err != nil {
		return nil, err
	}
	if err := parse("evictionSoft", soft, func(s Signal) (time.Duration, error) {
		g, ok := softGrace[string(s)]
		if !ok {
			return 0, fmt.Errorf("evictionSoftGracePeriod: no grace period for soft threshold %s", s)
		}
		d, err := time.ParseDuration(g)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("evictionSoftGracePeriod[%s]: %q is not a positive duration", s, g)
		}
		return d, nil
	}); err != nil {
		return nil, err
	}
	for k := range softGrace {
		if _, ok := soft[k]; !ok {
			return nil, fmt.Errorf("evictionSoftGracePeriod[%s]: no evictionSoft threshold for this signal", k)
		}
	}
	for k := range minReclaim {
		_, h := hard[k]
		_, s := soft[k]
		if !h && !s {
			return nil, fmt.Errorf("evictionMinimumReclaim[%s]: no evictionHard or evictionSoft threshold for this signal", k)
		}
	}
	return out, nil
}

// parseValue reads "10%" (0-100, exclusive of 0) or a non-negative quantity.
func parseValue(s string) (Value, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return Value{}, fmt.Errorf("%q is not a percentage in 0-100%%", s)
		}
		return Value{Percentage: f / 100}, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return Value{}, fmt.Errorf("%q is not a quantity: %w", s, err)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("%q must not be negative", s)
	}
	return Value{Quantity: &q}, nil
}
