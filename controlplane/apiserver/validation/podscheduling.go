package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the validation of the pod spec fields that steer scheduling: spec.schedulingGates,
// spec.affinity and spec.topologySpreadConstraints, with the field paths and messages of Kubernetes'
// pkg/apis/core/validation.

// schedulingGates checks that every gate name is a qualified name and appears once.
func schedulingGates(gates []corev1.PodSchedulingGate, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, g := range gates {
		for _, msg := range validation.IsQualifiedName(g.Name) {
			errs = append(errs, field.Invalid(p.Index(i), g.Name, msg))
		}
		if seen.Has(g.Name) {
			errs = append(errs, field.Duplicate(p.Index(i), g.Name))
		}
		seen.Insert(g.Name)
	}
	return errs
}

// onlyDeletedSchedulingGates allows an update to remove scheduling gates but not to add one (a gate
// is a promise made at creation that the pod waits; adding one later would race the scheduler).
func onlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, p *field.Path) field.ErrorList {
	had := sets.New[string]()
	for _, g := range old {
		had.Insert(g.Name)
	}
	var errs field.ErrorList
	for i, g := range gates {
		if !had.Has(g.Name) {
			errs = append(errs, field.Forbidden(p.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

// affinity checks node affinity (selector terms and their requirements, preference weights 1-100) and
// pod (anti-)affinity terms (selectors parse, topologyKey a non-empty label name, namespaces are names,
// matchLabelKeys/mismatchLabelKeys rules, weights 1-100).
func affinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			errs = append(errs, nodeSelector(req, np.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, weight(t.Weight, tp.Child("weight"))...)
			// As Kubernetes, preferred terms may hold any label value: they only score.
			errs = append(errs, nodeSelectorTerm(t.Preference, true, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func weight(w int32, p *field.Path) field.ErrorList {
	if w <= 0 || w > 100 {
		return field.ErrorList{field.Invalid(p, w, "must be in the range 1-100")}
	}
	return nil
}

// nodeSelector checks a required node selector: at least one term, each valid.
func nodeSelector(s *corev1.NodeSelector, p *field.Path) field.ErrorList {
	tp := p.Child("nodeSelectorTerms")
	if len(s.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(tp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, t := range s.NodeSelectorTerms {
		errs = append(errs, nodeSelectorTerm(t, false, tp.Index(i))...)
	}
	return errs
}

// nodeSelectorTerm checks matchExpressions (operator and value count, label key, label values unless
// anyValue) and matchFields (only metadata.name, In/NotIn with one node name).
func nodeSelectorTerm(t corev1.NodeSelectorTerm, anyValue bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		rp := p.Child("matchExpressions").Index(i)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		errs = append(errs, metav1validation.ValidateLabelName(r.Key, rp.Child("key"))...)
		if !anyValue {
			for j, v := range r.Values {
				for _, msg := range validation.IsValidLabelValue(v) {
					errs = append(errs, field.Invalid(rp.Child("values").Index(j), v, msg))
				}
			}
		}
	}
	for i, r := range t.MatchFields {
		rp := p.Child("matchFields").Index(i)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		if r.Key != metav1.ObjectNameField {
			errs = append(errs, field.Invalid(rp.Child("key"), r.Key, "not a valid field selector key"))
			continue
		}
		for j, v := range r.Values {
			for _, msg := range validation.IsDNS1123Subdomain(v) {
				errs = append(errs, field.Invalid(rp.Child("values").Index(j), v, msg))
			}
		}
	}
	return errs
}

// podAffinityTerms checks the required and the weighted preferred terms of a podAffinity or
// podAntiAffinity at p.
func podAffinityTerms(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range req {
		errs = append(errs, podAffinityTerm(t, p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, t := range pref {
		tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, weight(t.Weight, tp.Child("weight"))...)
		errs = append(errs, podAffinityTerm(t.PodAffinityTerm, tp.Child("podAffinityTerm"))...)
	}
	return errs
}

func podAffinityTerm(t corev1.PodAffinityTerm, p *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(t.LabelSelector, opts, p.Child("labelSelector"))
	errs = append(errs, metav1validation.ValidateLabelSelector(t.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			// "namespace", singular, is Kubernetes' path for this error.
			errs = append(errs, field.Invalid(p.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, labelKeys(p, t.MatchLabelKeys, t.MismatchLabelKeys, t.LabelSelector)...)
	if t.TopologyKey == "" {
		errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metav1validation.ValidateLabelName(t.TopologyKey, p.Child("topologyKey"))...)
}

// labelKeys checks matchLabelKeys and mismatchLabelKeys of a term at p, after the API server merged
// them into the labelSelector (see the pod strategy): keys are label names, they need a labelSelector,
// a matchLabelKeys key may not also be in the user's labelSelector (it then shows twice in the merged
// selector), and a key may not be in both lists.
func labelKeys(p *field.Path, match, mismatch []string, sel *metav1.LabelSelector) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		keys []string
		name string
	}{{match, "matchLabelKeys"}, {mismatch, "mismatchLabelKeys"}} {
		if len(l.keys) == 0 {
			continue
		}
		if sel == nil {
			errs = append(errs, field.Forbidden(p.Child(l.name), "must not be specified when labelSelector is not set"))
			continue
		}
		for i, k := range l.keys {
			errs = append(errs, metav1validation.ValidateLabelName(k, p.Child(l.name).Index(i))...)
		}
	}
	if sel != nil {
		index := map[string]int{}
		for i, k := range match {
			index[k] = i
		}
		seen := sets.KeySet(sel.MatchLabels)
		for _, e := range sel.MatchExpressions {
			if i, ok := index[e.Key]; ok && seen.Has(e.Key) {
				errs = append(errs, field.Invalid(p.Child("matchLabelKeys").Index(i), e.Key, "exists in both matchLabelKeys and labelSelector"))
			}
			seen.Insert(e.Key)
		}
	}
	mis := sets.New(mismatch...)
	for i, k := range match {
		if mis.Has(k) {
			errs = append(errs, field.Invalid(p.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

var (
	scheduleActions = []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
	nodePolicies    = []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}
)

// topologySpreadConstraints checks each constraint: maxSkew > 0, a topologyKey, whenUnsatisfiable
// DoNotSchedule or ScheduleAnyway, one constraint per {topologyKey, whenUnsatisfiable}, minDomains > 0
// and only with DoNotSchedule, nodeAffinityPolicy/nodeTaintsPolicy Honor or Ignore, matchLabelKeys
// rules, and a valid labelSelector.
func topologySpreadConstraints(cs []corev1.TopologySpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range cs {
		cp := p.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(cp.Child("topologyKey"), "can not be empty"))
		}
		if !slices.Contains(scheduleActions, c.WhenUnsatisfiable) {
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, scheduleActions))
		}
		for _, rest := range cs[i+1:] {
			if rest.TopologyKey == c.TopologyKey && rest.WhenUnsatisfiable == c.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(cp.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if m := c.MinDomains; m != nil {
			if *m <= 0 {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), *m, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), *m, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, pol := range []struct {
			v    *corev1.NodeInclusionPolicy
			name string
		}{{c.NodeAffinityPolicy, "nodeAffinityPolicy"}, {c.NodeTaintsPolicy, "nodeTaintsPolicy"}} {
			if pol.v != nil && !slices.Contains(nodePolicies, *pol.v) {
				errs = append(errs, field.NotSupported(cp.Child(pol.name), *pol.v, nodePolicies))
			}
		}
		errs = append(errs, labelKeys(cp, c.MatchLabelKeys, nil, c.LabelSelector)...)
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, cp.Child("labelSelector"))...)
	}
	return errs
}
