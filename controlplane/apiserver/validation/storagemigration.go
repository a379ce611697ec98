package validation

import (
	"fmt"
	"strings"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StorageVersionMigration validates a storagemigration.k8s.io/v1 StorageVersionMigration as kube-apiserver
// does: the name is a DNS-1123 subdomain, spec.resource.resource is required and a DNS-1035 label, and
// spec.resource.group, when set, a DNS-1123 subdomain.
func StorageVersionMigration(svm *svmv1.StorageVersionMigration) field.ErrorList {
	errs := Subdomain(&svm.ObjectMeta)
	p := specPath.Child("resource")
	if svm.Spec.Resource.Resource == "" {
		errs = append(errs, field.Required(p.Child("resource"), "resource is required to be set"))
	} else if msgs := utilvalidation.IsDNS1035Label(svm.Spec.Resource.Resource); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("resource"), svm.Spec.Resource.Resource, strings.Join(msgs, ",")))
	}
	if g := svm.Spec.Resource.Group; g != "" {
		if msgs := utilvalidation.IsDNS1123Subdomain(g); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("group"), g, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// StorageVersionMigrationUpdate is StorageVersionMigration plus upstream's update rule: the spec is
// immutable.
func StorageVersionMigrationUpdate(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
	errs := StorageVersionMigration(svm)
	if !equality.Semantic.DeepEqual(svm.Spec, old.Spec) {
		errs = append(errs, field.Invalid(specPath, svm.Spec, "field is immutable"))
	}
	return errs
}

// StorageVersionMigrationStatus validates a /status update as kube-apiserver does: status.resourceVersion
// is a well-formed resource version and, once set, immutable; the conditions are valid metav1 Conditions;
// Succeeded and Failed are never both True, and neither turns back once True.
func StorageVersionMigrationStatus(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status")
	if rv := svm.Status.ResourceVersion; rv != "" {
		if c, err := resourceversion.CompareResourceVersion(rv, rv); err != nil || c != 0 {
			if err == nil {
				err = fmt.Errorf("unable to compare resource versions, %s is not equal to %s", rv, rv)
			}
			errs = append(errs, field.Invalid(p.Child("resourceVersion"), rv, err.Error()))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(svm.Status.Conditions, p.Child("conditions"))...)
	if old.Status.ResourceVersion != "" && old.Status.ResourceVersion != svm.Status.ResourceVersion {
		errs = append(errs, field.Invalid(p.Child("resourceVersion"), svm.Status.ResourceVersion, "field is immutable"))
	}
	done := func(s *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
		return meta.IsStatusConditionTrue(s.Status.Conditions, string(t))
	}
	if done(svm, svmv1.MigrationSucceeded) && done(svm, svmv1.MigrationFailed) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if done(old, svmv1.MigrationSucceeded) && !done(svm, svmv1.MigrationSucceeded) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if done(old, svmv1.MigrationFailed) && !done(svm, svmv1.MigrationFailed) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}
