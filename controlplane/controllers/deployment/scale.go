package deployment

import (
	"context"
	"math"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
)

// activeSets returns the ReplicaSets of rss (nil entries skipped) with spec.replicas above zero
// (upstream FilterActiveReplicaSets).
func activeSets(rss ...*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && rsReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// annotationInt32 reads a non-negative int32 annotation of rs; ok false when it is missing or bad.
func annotationInt32(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, found := rs.Annotations[key]
	if !found {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// isScalingEvent reports whether spec.replicas changed since the active ReplicaSets were last sized:
// one of them carries a desired-replicas annotation other than spec.replicas (upstream
// isScalingEvent). ReplicaSets without the annotation (adopted ones) say nothing.
func isScalingEvent(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) bool {
	for _, rs := range activeSets(append(append([]*appsv1.ReplicaSet(nil), olds...), newRS)...) {
		if desired, ok := annotationInt32(rs, DesiredReplicasAnnotation); ok && desired != replicasOf(d) {
			return true
		}
	}
	return false
}

// proportionalScale is upstream's DeploymentController.scale: with one active ReplicaSet (or none:
// then the newest), that one takes spec.replicas; with a saturated new ReplicaSet the old ones go to
// zero; otherwise, for RollingUpdate, the replicas to add (or remove) up to spec.replicas+maxSurge are
// shared among the active ReplicaSets in proportion to their size against the max-replicas
// annotation they were sized under, largest first (newer first on ties when scaling up, older first
// when scaling down), leftovers going to the largest.
func (c *Controller) proportionalScale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	want := replicasOf(d)
	if rs := activeOrLatest(newRS, olds); rs != nil {
		if rsReplicas(rs) == want {
			return nil
		}
		return c.scale(ctx, d, rs, want)
	}
	if isSaturated(d, newRS) {
		for _, rs := range activeSets(olds...) {
			if err := c.scale(ctx, d, rs, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return nil
	}
	all := activeSets(append(append([]*appsv1.ReplicaSet(nil), olds...), newRS)...)
	allowed := int32(0)
	if want > 0 {
		allowed = want + maxSurge(d)
	}
	toAdd := allowed - activeReplicas(all)
	newer := func(i, j int) bool { return all[j].CreationTimestamp.Before(&all[i].CreationTimestamp) }
	older := func(i, j int) bool { return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp) }
	bySize := func(tie func(i, j int) bool) func(i, j int) bool {
		return func(i, j int) bool {
			if rsReplicas(all[i]) != rsReplicas(all[j]) {
				return rsReplicas(all[i]) > rsReplicas(all[j])
			}
			return tie(i, j)
		}
	}
	switch {
	case toAdd > 0:
		sort.SliceStable(all, bySize(newer))
	case toAdd < 0:
		sort.SliceStable(all, bySize(older))
	}
	sizes := make([]int32, len(all))
	added := int32(0)
	for i, rs := range all {
		sizes[i] = rsReplicas(rs)
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	if len(all) > 0 && toAdd != 0 {
		sizes[0] = max(0, sizes[0]+toAdd-added)
	}
	for i, rs := range all {
		if err := c.scale(ctx, d, rs, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// activeOrLatest is upstream FindActiveOrLatest: the only active ReplicaSet, or with none active the
// new one (else the newest old one); nil with several active.
func activeOrLatest(newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	active := activeSets(append(append([]*appsv1.ReplicaSet(nil), olds...), newRS)...)
	switch {
	case len(active) == 1:
		return active[0]
	case len(active) > 1:
		return nil
	case newRS != nil:
		return newRS
	case len(olds) > 0:
		return olds[len(olds)-1] // olds are sorted oldest first
	}
	return nil
}

// isSaturated reports whether rs runs spec.replicas available pods sized for the current spec
// (upstream IsSaturated).
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := annotationInt32(rs, DesiredReplicasAnnotation)
	return ok && rsReplicas(rs) == replicasOf(d) && desired == replicasOf(d) && rs.Status.AvailableReplicas == replicasOf(d)
}

// proportion is rs's share of toAdd replicas (negative: to remove) once added have been handed out
// (upstream GetReplicaSetProportion), never beyond what is left to hand out.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rsReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	f := fraction(rs, d)
	if left := toAdd - added; toAdd > 0 {
		return min(f, left)
	} else {
		return max(f, left)
	}
}

// fraction is upstream getReplicaSetFraction: rs's size scaled from the max-replicas annotation it was
// sized under (the Deployment's status.replicas when that is missing) to spec.replicas+maxSurge,
// rounded to the nearest integer, minus its size.
func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if replicasOf(d) == 0 {
		return -rsReplicas(rs)
	}
	maxNow := replicasOf(d) + maxSurge(d)
	before, ok := annotationInt32(rs, MaxReplicasAnnotation)
	if !ok || before == 0 {
		if before = d.Status.Replicas; before == 0 {
			return 0
		}
	}
	size := float64(rsReplicas(rs)*maxNow) / float64(before)
	return int32(math.Round(size)) - rsReplicas(rs)
}
