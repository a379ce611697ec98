package status

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReconcilePeriod is how often Run compares every pod's API status with the cache (upstream's status
// manager syncs all pods every 10 s).
const ReconcilePeriod = 10 * time.Second

// OwnedByKubelet reports whether the kubelet sets pod conditions of type t (upstream's
// kubetypes.PodConditionsByKubelet): PodScheduled, PodReadyToStartContainers, Initialized,
// ContainersReady and Ready. Others (readiness gates, DisruptionTarget, ...) belong to their writers.
func OwnedByKubelet(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady:
		return true
	}
	return false
}

// MergeConditions returns the kubelet's conditions from ours followed by the conditions others own
// from api (the API's copy), as upstream's mergePodStatus does.
func MergeConditions(ours, api []v1.PodCondition) []v1.PodCondition {
	out := make([]v1.PodCondition, 0, len(ours)+len(api))
	for _, c := range ours {
		if OwnedByKubelet(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range api {
		if !OwnedByKubelet(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// differs returns the status fields (JSON names, sorted) that writing ours would change in api: a merge
// patch replaces the fields ours sets and keeps the others, and conditions owned by others stay as api
// has them. Times compare at the API's precision (seconds).
func differs(api, ours *v1.PodStatus) []string {
	merged := *ours.DeepCopy()
	merged.Conditions = MergeConditions(merged.Conditions, api.Conditions)
	a, b := asMap(api), asMap(&merged)
	var out []string
	for k, v := range b {
		if !reflect.DeepEqual(a[k], v) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func asMap(s *v1.PodStatus) map[string]any {
	b, _ := json.Marshal(s)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

// Reconcile writes the status last set for the pod uid again when the API's copy of it (api: the pod as
// the pod watch delivered it, a static pod's mirror pod) differs from it in anything the kubelet sets,
// as upstream's needsReconcile does. It reports whether it wrote; a pod without a cached status is left
// alone.
func (m *Manager) Reconcile(ctx context.Context, uid types.UID, api *v1.Pod) (bool, error) {
	defer m.lockPod(uid)()
	m.mu.Lock()
	s, ok := m.statuses[uid]
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	fields := differs(&api.Status, &s)
	if len(fields) == 0 {
		return false, nil
	}
	m.log.Info("pod status in the API differs from the kubelet's, writing it again", "pod", api.Namespace+"/"+api.Name,
		"podUID", uid, "fields", fields)
	return true, m.write(ctx, uid, api, *s.DeepCopy())
}

// Notify asks Run to reconcile the pod uid now (e.g. its status changed on the watch). It never blocks.
func (m *Manager) Notify(uid types.UID) {
	m.mu.Lock()
	m.pending[uid] = true
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run reconciles (Reconcile) every pod with a cached status each period, and each pod passed to Notify at
// once, until ctx ends. apiPod returns the API's copy of a pod by its UID (nil: nothing to compare
// with, e.g. a pod gone from the API or a static pod without a mirror pod yet).
func (m *Manager) Run(ctx context.Context, period time.Duration, apiPod func(types.UID) *v1.Pod) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.mu.Lock()
			for uid := range m.statuses {
				m.pending[uid] = true
			}
			m.mu.Unlock()
		case <-m.wake:
		}
		m.mu.Lock()
		uids := make([]types.UID, 0, len(m.pending))
		for uid := range m.pending {
			uids = append(uids, uid)
		}
		clear(m.pending)
		m.mu.Unlock()
		for _, uid := range uids {
			api := apiPod(uid)
			if api == nil {
				continue
			}
			if _, err := m.Reconcile(ctx, uid, api); err != nil && ctx.Err() == nil {
				m.log.Warn("reconcile pod status", "pod", api.Namespace+"/"+api.Name, "podUID", uid, "err", err)
			}
		}
	}
}
