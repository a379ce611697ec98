package pod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// schedulingGatedMessage is the PodScheduled condition's message on a pod created with scheduling gates.
const schedulingGatedMessage = "Scheduling is blocked due to non-empty scheduling gates"

// setSchedulingGated gives a pod created with scheduling gates the condition PodScheduled=False,
// reason SchedulingGated (as kube-apiserver's pod strategy): the scheduler leaves the pod alone until
// the last gate is removed, so this condition is what tells users why the pod waits.
func setSchedulingGated(p *corev1.Pod) {
	if len(p.Spec.SchedulingGates) == 0 {
		return
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type:               corev1.PodScheduled,
		Status:             corev1.ConditionFalse,
		Reason:             corev1.PodReasonSchedulingGated,
		Message:            schedulingGatedMessage,
		LastTransitionTime: metav1.Now(),
	})
}

// mergeMatchLabelKeys turns matchLabelKeys (and mismatchLabelKeys) of the pod's affinity terms and
// topology spread constraints into labelSelector requirements on the pod's own label values — key In
// (value), resp. key NotIn (value) — as kube-apiserver does at pod creation (MatchLabelKeysInPodAffinity,
// MatchLabelKeysInPodTopologySpreadSelectorMerge). Keys the pod has no label for add nothing; a nil
// labelSelector stays nil (it selects no pod).
func mergeMatchLabelKeys(p *corev1.Pod) {
	if a := p.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			mergeTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Labels)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			mergeTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Labels)
		}
	}
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		mergeKeys(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn, p.Labels)
	}
}

func mergeTerms(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm, podLabels map[string]string) {
	terms := make([]*corev1.PodAffinityTerm, 0, len(req)+len(pref))
	for i := range req {
		terms = append(terms, &req[i])
	}
	for i := range pref {
		terms = append(terms, &pref[i].PodAffinityTerm)
	}
	for _, t := range terms {
		mergeKeys(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn, podLabels)
		mergeKeys(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn, podLabels)
	}
}

func mergeKeys(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator, podLabels map[string]string) {
	if sel == nil {
		return
	}
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
		}
	}
}
