package nodelifecycle

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// pressureTaints maps the kubelet's pressure conditions to the NoSchedule taint a True condition puts
// on the Node (upstream's nodeConditionToTaintKeyStatusMap, TaintNodesByCondition).
var pressureTaints = map[v1.NodeConditionType]string{
	v1.NodeMemoryPressure: v1.TaintNodeMemoryPressure,
	v1.NodeDiskPressure:   v1.TaintNodeDiskPressure,
	v1.NodePIDPressure:    v1.TaintNodePIDPressure,
}

// wantedPressureTaints returns the taint keys the Node's True pressure conditions call for, sorted.
func wantedPressureTaints(n *v1.Node) []string {
	var want []string
	for _, cond := range n.Status.Conditions {
		if key, ok := pressureTaints[cond.Type]; ok && cond.Status == v1.ConditionTrue {
			want = append(want, key)
		}
	}
	slices.Sort(want)
	return want
}

// havePressureTaints returns the NoSchedule pressure taint keys the Node carries, sorted.
func havePressureTaints(n *v1.Node) []string {
	var have []string
	for _, t := range n.Spec.Taints {
		for _, key := range pressureTaints {
			if t.Key == key && t.Effect == v1.TaintEffectNoSchedule {
				have = append(have, key)
			}
		}
	}
	slices.Sort(have)
	return have
}

// reconcilePressureTaints keeps node.kubernetes.io/memory-pressure, disk-pressure and pid-pressure
// (NoSchedule) on the Node exactly while its MemoryPressure, DiskPressure and PIDPressure conditions
// are True, so the scheduler places no new pods there (pods that tolerate them, like DaemonSet pods,
// still go).
func (c *Controller) reconcilePressureTaints(ctx context.Context, name string, now time.Time) error {
	n, err := c.nodes.Get(name)
	if err != nil || slices.Equal(wantedPressureTaints(n), havePressureTaints(n)) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := wantedPressureTaints(n)
		if slices.Equal(want, havePressureTaints(n)) {
			return nil
		}
		var taints []v1.Taint
		for _, t := range n.Spec.Taints {
			managed := false
			for _, key := range pressureTaints {
				managed = managed || (t.Key == key && t.Effect == v1.TaintEffectNoSchedule)
			}
			if !managed || slices.Contains(want, t.Key) {
				taints = append(taints, t)
			}
		}
		ts := metav1.NewTime(now)
		for _, key := range want {
			if !hasTaint(taints, key, v1.TaintEffectNoSchedule) {
				taints = append(taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule, TimeAdded: &ts})
			}
		}
		n.Spec.Taints = taints
		if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.log.Info("node pressure taints", "node", name, "taints", want)
		return nil
	})
}
