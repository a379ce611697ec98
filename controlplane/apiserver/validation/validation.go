// Package validation checks API objects the way kube-apiserver's validation does for the fields nodekit's
// components rely on (k8s.io/kubernetes pkg/apis/*/validation), returning field.ErrorList so the REST layer
// answers 422 Invalid with one cause per bad field. Metadata basics (labels, annotations, namespace
// presence) are checked by the generic registry; these functions add name formats and per-kind rules.
package validation

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	metaPath = field.NewPath("metadata")
	specPath = field.NewPath("spec")
)

// Name checks metadata.name with nameFn (a DNS-1123 subdomain or label check from apimachinery).
func Name(m *metav1.ObjectMeta, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	var errs field.ErrorList
	if m.Name == "" {
		return errs // the generic registry reports a missing name
	}
	for _, msg := range nameFn(m.Name, false) {
		errs = append(errs, field.Invalid(metaPath.Child("name"), m.Name, msg))
	}
	return errs
}

// Subdomain is Name with the DNS-1123 subdomain rule, used by most kinds.
func Subdomain(m *metav1.ObjectMeta) field.ErrorList {
	return Name(m, apivalidation.NameIsDNSSubdomain)
}

// Namespace validates a namespace: its name is a DNS-1123 label.
func Namespace(ns *corev1.Namespace) field.ErrorList {
	return Name(&ns.ObjectMeta, apivalidation.NameIsDNSLabel)
}

// Node validates a node: DNS-1123 subdomain name, podCIDR(s) parse.
func Node(n *corev1.Node) field.ErrorList {
	errs := Subdomain(&n.ObjectMeta)
	for i, c := range n.Spec.PodCIDRs {
		for _, msg := range validation.IsValidCIDR(field.NewPath("spec", "podCIDRs").Index(i), c) {
			errs = append(errs, msg)
		}
	}
	for i, t := range n.Spec.Taints {
		errs = append(errs, taint(t, specPath.Child("taints").Index(i))...)
	}
	return errs
}

func taint(t corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
	}
	return errs
}

// ConfigMap validates data keys (file-name-like keys, no key in both data and binaryData).
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := Subdomain(&cm.ObjectMeta)
	for k := range cm.Data {
		errs = append(errs, configKey(k, field.NewPath("data").Key(k))...)
	}
	for k := range cm.BinaryData {
		errs = append(errs, configKey(k, field.NewPath("binaryData").Key(k))...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Duplicate(field.NewPath("binaryData").Key(k), k))
		}
	}
	return errs
}

// Secret validates data keys.
func Secret(s *corev1.Secret) field.ErrorList {
	errs := Subdomain(&s.ObjectMeta)
	for k := range s.Data {
		errs = append(errs, configKey(k, field.NewPath("data").Key(k))...)
	}
	return errs
}

// ConfigMapUpdate validates an update of old to cm as upstream's ValidateConfigMapUpdate: once old is
// immutable, immutable cannot be unset and data and binaryData cannot change (metadata still can);
// then cm is validated as on create.
func ConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	if isTrue(old.Immutable) {
		errs = append(errs, immutableSet(cm.Immutable)...)
		if !equality.Semantic.DeepEqual(cm.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !equality.Semantic.DeepEqual(cm.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, ConfigMap(cm)...)
}

// SecretUpdate validates an update of old to s as upstream's ValidateSecretUpdate: type never changes;
// once old is immutable, immutable cannot be unset and data cannot change; then s is validated as on
// create.
func SecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))
	if isTrue(old.Immutable) {
		errs = append(errs, immutableSet(s.Immutable)...)
		if !equality.Semantic.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, Secret(s)...)
}

func isTrue(b *bool) bool { return b != nil && *b }

// immutableSet refuses clearing immutable on an object that had it set.
func immutableSet(b *bool) field.ErrorList {
	if isTrue(b) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set")}
}

func configKey(k string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}

// ServiceAccount validates the name.
func ServiceAccount(sa *corev1.ServiceAccount) field.ErrorList { return Subdomain(&sa.ObjectMeta) }

// Event validates a core/v1 Event (also what events.k8s.io/v1 writes) as upstream's legacy event
// validation (k8s.io/kubernetes pkg/apis/core/validation ValidateEventCreate for core/v1): an event without
// eventTime (the core/v1 form) has involvedObject.namespace equal to its own namespace, or, when that is
// empty, lives in "default" or is cluster-scoped; an event with eventTime (the events.k8s.io form) names its
// reportingController (a qualified name), reportingInstance, action and reason within upstream's
// length limits, and an empty involvedObject.namespace only in default or kube-system.
func Event(e *corev1.Event) field.ErrorList {
	errs := Subdomain(&e.ObjectMeta)
	ns := field.NewPath("involvedObject", "namespace")
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		return errs
	}
	if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		errs = append(errs, field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	required := func(name, value string, limit int) {
		p := field.NewPath(name)
		switch {
		case value == "":
			errs = append(errs, field.Required(p, ""))
		case limit > 0 && len(value) > limit:
			errs = append(errs, field.Invalid(p, "", fmt.Sprintf("can have at most %d characters", limit)))
		}
	}
	required("reportingController", e.ReportingController, 0)
	for _, msg := range validation.IsQualifiedName(e.ReportingController) {
		if e.ReportingController != "" {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), e.ReportingController, msg))
		}
	}
	required("reportingInstance", e.ReportingInstance, 128)
	required("action", e.Action, 128)
	required("reason", e.Reason, 128)
	if len(e.Message) > 1024 {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", "can have at most 1024 characters"))
	}
	return errs
}

// Lease validates a lease's durations.
func Lease(l *coordinationv1.Lease) field.ErrorList {
	errs := Subdomain(&l.ObjectMeta)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	return errs
}

// Endpoints validates subset addresses and ports.
func Endpoints(ep *corev1.Endpoints) field.ErrorList {
	errs := Subdomain(&ep.ObjectMeta)
	for i, ss := range ep.Subsets {
		p := field.NewPath("subsets").Index(i)
		for j, a := range append(append([]corev1.EndpointAddress{}, ss.Addresses...), ss.NotReadyAddresses...) {
			errs = append(errs, ip(a.IP, p.Child("addresses").Index(j).Child("ip"))...)
		}
		for j, port := range ss.Ports {
			errs = append(errs, portNumber(port.Port, p.Child("ports").Index(j).Child("port"))...)
			errs = append(errs, protocol(port.Protocol, p.Child("ports").Index(j).Child("protocol"))...)
		}
	}
	return errs
}

// EndpointSlice validates the address type, endpoints' addresses and ports.
func EndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := Subdomain(&s.ObjectMeta)
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, []string{"IPv4", "IPv6", "FQDN"}))
	}
	for i, ep := range s.Endpoints {
		p := field.NewPath("endpoints").Index(i).Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(p, "at least one address"))
		}
		if s.AddressType != discoveryv1.AddressTypeFQDN {
			for j, a := range ep.Addresses {
				errs = append(errs, ip(a, p.Index(j))...)
			}
		}
	}
	for i, port := range s.Ports {
		p := field.NewPath("ports").Index(i)
		if port.Port != nil {
			errs = append(errs, portNumber(*port.Port, p.Child("port"))...)
		}
		if port.Protocol != nil {
			errs = append(errs, protocol(*port.Protocol, p.Child("protocol"))...)
		}
	}
	return errs
}

// Deployment validates replicas, the selector/template label match and the pod template.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	errs := Subdomain(&d.ObjectMeta)
	errs = append(errs, workload(d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template)...)
	if d.Spec.Strategy.Type != "" && d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		errs = append(errs, field.NotSupported(specPath.Child("strategy", "type"), d.Spec.Strategy.Type, []string{"RollingUpdate", "Recreate"}))
	}
	errs = append(errs, rollingUpdate(d.Spec.Strategy, specPath.Child("strategy"))...)
	for _, v := range []struct {
		name string
		val  *int32
	}{{"minReadySeconds", &d.Spec.MinReadySeconds}, {"revisionHistoryLimit", d.Spec.RevisionHistoryLimit}, {"progressDeadlineSeconds", d.Spec.ProgressDeadlineSeconds}} {
		if v.val != nil && *v.val < 0 {
			errs = append(errs, field.Invalid(specPath.Child(v.name), *v.val, "must be greater than or equal to 0"))
		}
	}
	return errs
}

// rollingUpdate checks maxSurge and maxUnavailable as Kubernetes does: each a non-negative integer or a
// percentage, maxUnavailable at most 100%, not both zero; and no rollingUpdate with the Recreate type.
func rollingUpdate(st appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	ru := st.RollingUpdate
	if ru == nil {
		return nil
	}
	rp := p.Child("rollingUpdate")
	if st.Type == appsv1.RecreateDeploymentStrategyType {
		return field.ErrorList{field.Forbidden(rp, "may not be specified when strategy `type` is 'Recreate'")}
	}
	var errs field.ErrorList
	zero := 0
	for _, v := range []struct {
		name string
		val  *intstr.IntOrString
	}{{"maxUnavailable", ru.MaxUnavailable}, {"maxSurge", ru.MaxSurge}} {
		if v.val == nil {
			continue
		}
		fp := rp.Child(v.name)
		n, isPercent, err := intOrPercent(v.val, fp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case n < 0:
			errs = append(errs, field.Invalid(fp, v.val.String(), "must be greater than or equal to 0"))
		case v.name == "maxUnavailable" && isPercent && n > 100:
			errs = append(errs, field.Invalid(fp, v.val.String(), "must not be greater than 100%"))
		case n == 0:
			zero++
		}
	}
	if zero == 2 {
		errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
	}
	return errs
}

// ReplicaSet validates replicas, selector and template.
func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	return append(Subdomain(&rs.ObjectMeta), workload(rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template)...)
}

// DaemonSet validates selector and template.
func DaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	return append(Subdomain(&ds.ObjectMeta), workload(nil, ds.Spec.Selector, &ds.Spec.Template)...)
}

// WorkloadUpdate checks that an apps/v1 selector did not change (it is immutable in apps/v1).
func WorkloadUpdate(sel, oldSel *metav1.LabelSelector) field.ErrorList {
	return apivalidation.ValidateImmutableField(sel, oldSel, specPath.Child("selector"))
}

func workload(replicas *int32, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) field.ErrorList {
	var errs field.ErrorList
	if replicas != nil && *replicas < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *replicas, "must be greater than or equal to 0"))
	}
	if sel == nil {
		return append(errs, field.Required(specPath.Child("selector"), ""))
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(specPath.Child("selector"), sel, "empty selector is invalid for deployment"))
	}
	tp := specPath.Child("template")
	errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, tp.Child("metadata", "labels"))...)
	if s, err := metav1.LabelSelectorAsSelector(sel); err == nil && !s.Matches(labelsSet(tmpl.Labels)) {
		errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, PodSpec(&tmpl.Spec, tp.Child("spec"))...)
	return errs
}

func ip(s string, p *field.Path) field.ErrorList {
	return validation.IsValidIP(p, s)
}

func portNumber(port int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(p, port, msg))
	}
	return errs
}

var protocols = sets.New(string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP))

func protocol(proto corev1.Protocol, p *field.Path) field.ErrorList {
	if proto == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if !protocols.Has(string(proto)) {
		return field.ErrorList{field.NotSupported(p, proto, sets.List(protocols))}
	}
	return nil
}

func required(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, fmt.Sprintf("%s is required", p.String()))}
	}
	return nil
}

// ControllerRevision validates the name and revision (non-negative) of an apps/v1 ControllerRevision.
func ControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := Subdomain(&cr.ObjectMeta)
	if cr.Revision < 0 {
		errs = append(errs, field.Invalid(field.NewPath("revision"), cr.Revision, "must be greater than or equal to 0"))
	}
	return errs
}

// ControllerRevisionUpdate checks that a ControllerRevision's data did not change (it is immutable).
func ControllerRevisionUpdate(cr, old *appsv1.ControllerRevision) field.ErrorList {
	return apivalidation.ValidateImmutableField(cr.Data, old.Data, field.NewPath("data"))
}

// PodTemplate validates a core/v1 PodTemplate as kube-apiserver's ValidatePodTemplate does: a DNS-1123
// subdomain name, the template's labels and its pod spec (at template.spec). Any restartPolicy is
// allowed: a bare template names no workload that would restrict it.
func PodTemplate(pt *corev1.PodTemplate) field.ErrorList {
	tp := field.NewPath("template")
	errs := Subdomain(&pt.ObjectMeta)
	errs = append(errs, metav1validation.ValidateLabels(pt.Template.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pt.Template.Annotations, tp.Child("metadata", "annotations"))...)
	return append(errs, PodSpec(&pt.Template.Spec, tp.Child("spec"))...)
}

// ReplicationController validates a core/v1 ReplicationController as kube-apiserver's
// ValidateReplicationController does: a DNS-1123 subdomain name; replicas and minReadySeconds not
// negative; a non-empty selector of valid labels; a template whose labels the selector matches, whose
// restartPolicy is Always and which sets no activeDeadlineSeconds; and the template's pod spec.
func ReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	errs := Subdomain(&rc.ObjectMeta)
	if r := rc.Spec.Replicas; r != nil && *r < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *r, "must be greater than or equal to 0"))
	}
	if rc.Spec.MinReadySeconds < 0 {
		errs = append(errs, field.Invalid(specPath.Child("minReadySeconds"), rc.Spec.MinReadySeconds, "must be greater than or equal to 0"))
	}
	sp := specPath.Child("selector")
	if len(rc.Spec.Selector) == 0 {
		errs = append(errs, field.Required(sp, ""))
	}
	errs = append(errs, metav1validation.ValidateLabels(rc.Spec.Selector, sp)...)
	tp := specPath.Child("template")
	t := rc.Spec.Template
	if t == nil {
		return append(errs, field.Required(tp, ""))
	}
	lp := tp.Child("metadata", "labels")
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, lp)...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, tp.Child("metadata", "annotations"))...)
	if len(rc.Spec.Selector) > 0 && !labelsSet(rc.Spec.Selector).AsSelector().Matches(labelsSet(t.Labels)) {
		errs = append(errs, field.Invalid(lp, t.Labels, "`selector` does not match template `labels`"))
	}
	pp := tp.Child("spec")
	errs = append(errs, PodSpec(&t.Spec, pp)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(pp.Child("restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(pp.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

// ReplicationControllerStatus validates a ReplicationController's status as kube-apiserver does: no
// negative count, and fullyLabeledReplicas, readyReplicas at most replicas, availableReplicas at
// most readyReplicas.
func ReplicationControllerStatus(rc *corev1.ReplicationController) field.ErrorList {
	st, p := rc.Status, field.NewPath("status")
	var errs field.ErrorList
	for _, c := range []struct {
		name string
		n    int64
	}{{"replicas", int64(st.Replicas)}, {"fullyLabeledReplicas", int64(st.FullyLabeledReplicas)}, {"readyReplicas", int64(st.ReadyReplicas)},
		{"availableReplicas", int64(st.AvailableReplicas)}, {"observedGeneration", st.ObservedGeneration}} {
		if c.n < 0 {
			errs = append(errs, field.Invalid(p.Child(c.name), c.n, "must be greater than or equal to 0"))
		}
	}
	if st.FullyLabeledReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("fullyLabeledReplicas"), st.FullyLabeledReplicas, "cannot be greater than the number of replicas"))
	}
	if st.ReadyReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), st.ReadyReplicas, "cannot be greater than the number of replicas"))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}
