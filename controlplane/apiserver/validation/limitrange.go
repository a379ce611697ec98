package validation

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// limitTypes are the LimitRange item types the LimitRanger admission plugin knows.
var limitTypes = []string{string(corev1.LimitTypeContainer), string(corev1.LimitTypePod), string(corev1.LimitTypePersistentVolumeClaim)}

// LimitRange validates a LimitRange as kube-apiserver does: each item's type is Container, Pod or
// PersistentVolumeClaim, at most once; resource names are container resources (cpu, memory,
// ephemeral-storage, hugepages-<size> or an extended domain/name) for Container and Pod items and
// storage for PersistentVolumeClaim items, which need a min or max; Pod items have no default or
// defaultRequest; per resource min <= defaultRequest <= default <= max, and maxLimitRequestRatio is at
// least 1 and at most max/min.
func LimitRange(lr *corev1.LimitRange) field.ErrorList {
	errs := Subdomain(&lr.ObjectMeta)
	seen := sets.New[corev1.LimitType]()
	p := specPath.Child("limits")
	for i, item := range lr.Spec.Limits {
		ip := p.Index(i)
		if !sets.New(limitTypes...).Has(string(item.Type)) {
			errs = append(errs, field.NotSupported(ip.Child("type"), item.Type, limitTypes))
		} else if seen.Has(item.Type) {
			errs = append(errs, field.Duplicate(ip.Child("type"), item.Type))
		}
		seen.Insert(item.Type)
		names := func(l corev1.ResourceList, child string) {
			for k := range l {
				errs = append(errs, limitResourceName(item.Type, k, ip.Child(child).Key(string(k)))...)
			}
		}
		names(item.Max, "max")
		names(item.Min, "min")
		names(item.MaxLimitRequestRatio, "maxLimitRequestRatio")
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(ip.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(ip.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		} else {
			names(item.Default, "default")
			names(item.DefaultRequest, "defaultRequest")
		}
		if item.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := item.Min[corev1.ResourceStorage]
			_, hasMax := item.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				errs = append(errs, field.Required(ip.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		errs = append(errs, limitOrder(item, ip)...)
	}
	return errs
}

// limitOrder checks min <= defaultRequest <= default <= max and the ratio, per resource, in upstream's
// words.
func limitOrder(item corev1.LimitRangeItem, ip *field.Path) field.ErrorList {
	var errs field.ErrorList
	keys := sets.New[corev1.ResourceName]()
	for _, l := range []corev1.ResourceList{item.Min, item.Max, item.Default, item.DefaultRequest, item.MaxLimitRequestRatio} {
		for k := range l {
			keys.Insert(k)
		}
	}
	sorted := keys.UnsortedList()
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for _, k := range sorted {
		min, hasMin := item.Min[k]
		max, hasMax := item.Max[k]
		def, hasDef := item.Default[k]
		defReq, hasDefReq := item.DefaultRequest[k]
		ratio, hasRatio := item.MaxLimitRequestRatio[k]
		key := string(k)
		if hasMin && hasMax && min.Cmp(max) > 0 {
			errs = append(errs, field.Invalid(ip.Child("min").Key(key), min.String(), fmt.Sprintf("min value %s is greater than max value %s", min.String(), max.String())))
		}
		if hasDefReq && hasMin && min.Cmp(defReq) > 0 {
			errs = append(errs, field.Invalid(ip.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("min value %s is greater than default request value %s", min.String(), defReq.String())))
		}
		if hasDefReq && hasMax && defReq.Cmp(max) > 0 {
			errs = append(errs, field.Invalid(ip.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), max.String())))
		}
		if hasDefReq && hasDef && defReq.Cmp(def) > 0 {
			errs = append(errs, field.Invalid(ip.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
		}
		if hasDef && hasMin && min.Cmp(def) > 0 {
			errs = append(errs, field.Invalid(ip.Child("default").Key(key), min.String(), fmt.Sprintf("min value %s is greater than default value %s", min.String(), def.String())))
		}
		if hasDef && hasMax && def.Cmp(max) > 0 {
			errs = append(errs, field.Invalid(ip.Child("default").Key(key), max.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), max.String())))
		}
		if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
			errs = append(errs, field.Invalid(ip.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
		}
		if hasRatio && hasMin && hasMax && min.Sign() > 0 {
			r, lo, hi := float64(ratio.Value()), min.Value(), max.Value()
			if ratio.Value() < resource.MaxMilliValue && lo < resource.MaxMilliValue && hi < resource.MaxMilliValue {
				r, lo, hi = float64(ratio.MilliValue())/1000, min.MilliValue(), max.MilliValue()
			}
			if limit := float64(hi) / float64(lo); r > limit {
				errs = append(errs, field.Invalid(ip.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), limit)))
			}
		}
		if !overcommitAllowed(k) && hasDef && hasDefReq && def.Cmp(defReq) != 0 {
			errs = append(errs, field.Invalid(ip.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default value %s must equal to defaultRequest value %s in %s", def.String(), defReq.String(), k)))
		}
	}
	return errs
}

// overcommitAllowed: only cpu, memory and ephemeral-storage (native, not hugepages) may have requests
// below limits.
func overcommitAllowed(k corev1.ResourceName) bool {
	return k == corev1.ResourceCPU || k == corev1.ResourceMemory || k == corev1.ResourceEphemeralStorage
}

// limitResourceName: container resources for Container and Pod items, storage for
// PersistentVolumeClaim ones.
func limitResourceName(t corev1.LimitType, k corev1.ResourceName, p *field.Path) field.ErrorList {
	name := string(k)
	for _, msg := range validation.IsQualifiedName(name) {
		return field.ErrorList{field.Invalid(p, name, msg)}
	}
	if t == corev1.LimitTypePersistentVolumeClaim {
		if k != corev1.ResourceStorage {
			return field.ErrorList{field.NotSupported(p, name, []string{string(corev1.ResourceStorage)})}
		}
		return nil
	}
	switch {
	case k == corev1.ResourceCPU || k == corev1.ResourceMemory || k == corev1.ResourceEphemeralStorage,
		strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		return nil
	case !strings.Contains(name, "/"):
		return field.ErrorList{field.Invalid(p, name, "must be a standard resource for containers")}
	case strings.Contains(strings.SplitN(name, "/", 2)[0], "kubernetes.io"), strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix):
		return field.ErrorList{field.Invalid(p, name, "doesn't follow extended resource name standard")}
	}
	return nil
}
