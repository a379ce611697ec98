package config

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit/kubelet/eviction"
	"github.com/nodekit/nodekit/kubelet/imagegc"
	"github.com/nodekit/nodekit/kubelet/logs"
)

// minLogMonitorInterval is upstream's lower bound on containerLogMonitorInterval.
const minLogMonitorInterval = 3 * time.Second

// LogPolicy returns the container log rotation policy of containerLogMaxSize and containerLogMaxFiles.
// Errors name the field.
func LogPolicy(c *kubeletv1beta1.KubeletConfiguration) (logs.Policy, error) {
	q, err := resource.ParseQuantity(c.ContainerLogMaxSize)
	if err != nil {
		return logs.Policy{}, fmt.Errorf("containerLogMaxSize: %q is not a quantity: %w", c.ContainerLogMaxSize, err)
	}
	p := logs.Policy{MaxSize: q.Value(), MaxFiles: int(deref(c.ContainerLogMaxFiles))}
	return p, p.Validate()
}

// ImageGCPolicy returns the image GC policy of imageGCHighThresholdPercent, imageGCLowThresholdPercent
// and imageMinimumGCAge. Errors name the field.
func ImageGCPolicy(c *kubeletv1beta1.KubeletConfiguration) (imagegc.Policy, error) {
	p := imagegc.Policy{HighThresholdPercent: int(deref(c.ImageGCHighThresholdPercent)),
		LowThresholdPercent: int(deref(c.ImageGCLowThresholdPercent)), MinAge: c.ImageMinimumGCAge.Duration}
	return p, p.Validate()
}

// EvictionThresholds parses evictionHard (upstream's Linux default, eviction.DefaultEvictionHard,
// when unset), evictionSoft, evictionSoftGracePeriod and evictionMinimumReclaim. Errors name the field.
func EvictionThresholds(c *kubeletv1beta1.KubeletConfiguration) ([]eviction.Threshold, error) {
	hard := c.EvictionHard
	if hard == nil {
		hard = eviction.DefaultEvictionHard
	}
	return eviction.ParseThresholds(hard, c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMinimumReclaim)
}

// validateLongRun checks the log rotation, image GC and eviction fields.
func validateLongRun(c *kubeletv1beta1.KubeletConfiguration) error {
	if _, err := LogPolicy(c); err != nil {
		return err
	}
	if c.ContainerLogMonitorInterval == nil || c.ContainerLogMonitorInterval.Duration < minLogMonitorInterval {
		return fmt.Errorf("containerLogMonitorInterval: must be at least %v", minLogMonitorInterval)
	}
	if _, err := ImageGCPolicy(c); err != nil {
		return err
	}
	if c.EvictionPressureTransitionPeriod.Duration < 0 {
		return fmt.Errorf("evictionPressureTransitionPeriod: %v must not be negative", c.EvictionPressureTransitionPeriod.Duration)
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		return fmt.Errorf("evictionMaxPodGracePeriod: %d must not be negative", c.EvictionMaxPodGracePeriod)
	}
	_, err := EvictionThresholds(c)
	return err
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
