package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/controlplane/quota"
)

// standardQuotaResources are the unqualified quota resource names (upstream's standardQuotaResources;
// hugepages-<size> and requests.hugepages-<size> are standard too).
var standardQuotaResources = sets.New(
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourcePersistentVolumeClaims, corev1.ResourceConfigMaps,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// integerQuotaResources must be whole numbers (object counts).
var integerQuotaResources = sets.New(
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// podScopeResources are the standard names the pod scopes may limit (BestEffort: pods only).
var podScopeResources = sets.New(corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory)

// implementedScopes are the scopes nodekit's pod evaluator implements. VolumeAttributesClass (a claim
// scope) is a standard scope nodekit refuses: it serves no PersistentVolumeClaims.
var implementedScopes = []corev1.ResourceQuotaScope{
	corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
	corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
}

func standardQuotaName(r corev1.ResourceName) bool {
	return standardQuotaResources.Has(r) || strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(r), corev1.ResourceRequestsHugePagesPrefix)
}

// extendedName reports whether r is fully qualified outside kubernetes.io (an extended resource).
func extendedName(r corev1.ResourceName) bool {
	return strings.Contains(string(r), "/") && !strings.Contains(string(r), corev1.ResourceDefaultNamespacePrefix)
}

// ResourceQuota validates a core/v1 ResourceQuota as kube-apiserver's ValidateResourceQuota does: a
// DNS-1123 subdomain name; spec.hard names that are standard quota resources or fully qualified, with
// non-negative quantities (whole numbers for object counts and extended resources); scopes and
// scopeSelector made of known scopes, compatible with the hard resources and not conflicting
// (BestEffort with NotBestEffort, Terminating with NotTerminating). Beyond upstream it refuses what
// nodekit would not enforce: a hard resource no evaluator counts and the VolumeAttributesClass scope.
func ResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := Subdomain(&q.ObjectMeta)
	errs = append(errs, quotaSpec(&q.Spec, specPath)...)
	return errs
}

// ResourceQuotaUpdate validates an update: the new object as ResourceQuota, and spec.scopes immutable.
func ResourceQuotaUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	errs := ResourceQuota(q)
	if !sets.New(q.Spec.Scopes...).Equal(sets.New(old.Spec.Scopes...)) {
		errs = append(errs, field.Invalid(specPath.Child("scopes"), q.Spec.Scopes, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// ResourceQuotaStatus validates a /status update: status.hard and status.used hold valid quota
// resource names and non-negative quantities.
func ResourceQuotaStatus(q *corev1.ResourceQuota) field.ErrorList {
	p := field.NewPath("status")
	errs := quotaList(q.Status.Hard, p.Child("hard"), false)
	return append(errs, quotaList(q.Status.Used, p.Child("used"), false)...)
}

func quotaSpec(spec *corev1.ResourceQuotaSpec, p *field.Path) field.ErrorList {
	errs := quotaList(spec.Hard, p.Child("hard"), true)
	var scopes []corev1.ResourceQuotaScope
	for i, s := range spec.Scopes {
		errs = append(errs, scope(s, spec.Hard, p.Child("scopes").Index(i))...)
		scopes = append(scopes, s)
	}
	if sel := spec.ScopeSelector; sel != nil {
		sp := p.Child("scopeSelector", "matchExpressions")
		for i, req := range sel.MatchExpressions {
			ip := sp.Index(i)
			errs = append(errs, scope(req.ScopeName, spec.Hard, ip.Child("scopeName"))...)
			switch req.ScopeName {
			case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating,
				corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
				if req.Operator != corev1.ScopeSelectorOpExists {
					errs = append(errs, field.Invalid(ip.Child("operator"), req.Operator,
						"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
				}
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(ip.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(ip.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.Invalid(ip.Child("operator"), req.Operator, "not a valid selector operator"))
			}
			scopes = append(scopes, req.ScopeName)
		}
	}
	set := sets.New(scopes...)
	if set.HasAll(corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort) ||
		set.HasAll(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating) {
		errs = append(errs, field.Invalid(p.Child("scopes"), scopes, "conflicting scopes"))
	}
	return errs
}

// scope checks that s is a scope nodekit implements and that every standard hard resource may be
// limited under it.
func scope(s corev1.ResourceQuotaScope, hard corev1.ResourceList, p *field.Path) field.ErrorList {
	if s == corev1.ResourceQuotaScopeVolumeAttributesClass {
		return field.ErrorList{field.Invalid(p, s, "not implemented: nodekit serves no volumeattributesclasses (storage.k8s.io), so it has no VolumeAttributesClass scope")}
	}
	if !sets.New(implementedScopes...).Has(s) {
		return field.ErrorList{field.NotSupported(p, s, implementedScopes)}
	}
	var errs field.ErrorList
	for _, r := range sets.List(sets.KeySet(hard)) {
		if !standardQuotaName(r) {
			continue
		}
		ok := podScopeResources.Has(r)
		if s == corev1.ResourceQuotaScopeBestEffort {
			ok = r == corev1.ResourcePods
		}
		if !ok {
			errs = append(errs, field.Invalid(p, s, "unsupported scope applied to resource "+string(r)))
		}
	}
	return errs
}

// quotaList checks a list of quota resource names and quantities. counted also refuses names no
// evaluator measures (spec.hard).
func quotaList(list corev1.ResourceList, p *field.Path, counted bool) field.ErrorList {
	var errs field.ErrorList
	for _, r := range sets.List(sets.KeySet(list)) {
		q, rp := list[r], p.Key(string(r))
		errs = append(errs, quotaName(r, rp, counted)...)
		if q.Cmp(resource.Quantity{}) < 0 {
			errs = append(errs, field.Invalid(rp, q.String(), apivalidation.IsNegativeErrorMsg))
		}
		if (integerQuotaResources.Has(r) || extendedName(r) && !strings.HasPrefix(string(r), corev1.DefaultResourceRequestsPrefix)) &&
			q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(rp, q.String(), "must be an integer"))
		}
	}
	return errs
}

func quotaName(r corev1.ResourceName, p *field.Path, counted bool) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(r)) {
		errs = append(errs, field.Invalid(p, r, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(string(r), "/") && !standardQuotaName(r) {
		return field.ErrorList{field.Invalid(p, r, "must be a standard resource for quota")}
	}
	if counted && !quota.Counted(r) {
		return field.ErrorList{field.Invalid(p, r, "nodekit's quota counts no such resource (known: the pod compute resources, "+
			"requests.<extended resource>, object counts count/<resource>[.<group>] and their legacy names)")}
	}
	return nil
}
