// Package admissionregistration is admissionregistration.k8s.io/v1, cluster-scoped:
// validatingwebhookconfigurations, mutatingwebhookconfigurations, validatingadmissionpolicies (with
// /status) and validatingadmissionpolicybindings. The admission chain (package admission) acts on them:
// the webhook and policy plugins of k8s.io/apiserver watch these objects and call the webhooks or run the
// policies' CEL validations. Validation is package validation's (field errors, CEL compiled on write).
package admissionregistration

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns the admissionregistration.k8s.io/v1 endpoints keyed by resource path.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	gr := admissionregistrationv1.Resource
	vwc, _, err := store.New(getter, store.Spec{Resource: gr("validatingwebhookconfigurations"), Singular: "validatingwebhookconfiguration",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
		Strategy: store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
			return validation.ValidatingWebhookConfiguration(o.(*admissionregistrationv1.ValidatingWebhookConfiguration))
		}),
		Table: webhooksTable(func(o runtime.Object) int {
			return len(o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
		})})
	if err != nil {
		return nil, err
	}
	mwc, _, err := store.New(getter, store.Spec{Resource: gr("mutatingwebhookconfigurations"), Singular: "mutatingwebhookconfiguration",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
		Strategy: store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
			return validation.MutatingWebhookConfiguration(o.(*admissionregistrationv1.MutatingWebhookConfiguration))
		}),
		Table: webhooksTable(func(o runtime.Object) int {
			return len(o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
		})})
	if err != nil {
		return nil, err
	}
	vap, vapStatus, err := store.New(getter, store.Spec{Resource: gr("validatingadmissionpolicies"), Singular: "validatingadmissionpolicy",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
		Strategy: store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
			return validation.ValidatingAdmissionPolicy(o.(*admissionregistrationv1.ValidatingAdmissionPolicy))
		}),
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.ValidatingAdmissionPolicyStatus(o.(*admissionregistrationv1.ValidatingAdmissionPolicy))
		},
		Table: policyTable})
	if err != nil {
		return nil, err
	}
	vapb, _, err := store.New(getter, store.Spec{Resource: gr("validatingadmissionpolicybindings"), Singular: "validatingadmissionpolicybinding",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
		Strategy: store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
			return validation.ValidatingAdmissionPolicyBinding(o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding))
		}),
		Table: bindingTable})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"validatingwebhookconfigurations": vwc, "mutatingwebhookconfigurations": mwc,
		"validatingadmissionpolicies": vap, "validatingadmissionpolicies/status": vapStatus,
		"validatingadmissionpolicybindings": vapb,
	}, nil
}

// webhooksTable is `kubectl get` of a webhook configuration: NAME, WEBHOOKS, AGE (as kube-apiserver).
func webhooksTable(count func(runtime.Object) int) store.Table {
	return store.Table{
		Columns: []metav1.TableColumnDefinition{{Name: "Webhooks", Type: "integer", Description: "the number of webhooks"}},
		Cells:   func(o runtime.Object) []any { return []any{int64(count(o))} },
	}
}

var policyTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Validations", "the number of spec.validations"),
		store.Column("ParamKind", "spec.paramKind, or <unset>"),
	},
	Cells: func(o runtime.Object) []any {
		p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		pk := "<unset>"
		if p.Spec.ParamKind != nil {
			pk = p.Spec.ParamKind.APIVersion + "/" + p.Spec.ParamKind.Kind
		}
		return []any{int64(len(p.Spec.Validations)), pk}
	},
}

var bindingTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("PolicyName", "spec.policyName"),
		store.Column("ParamRef", "spec.paramRef, or <unset>"),
	},
	Cells: func(o runtime.Object) []any {
		b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		pr := "<unset>"
		if b.Spec.ParamRef != nil {
			pr = b.Spec.ParamRef.Namespace + "/" + b.Spec.ParamRef.Name
			if b.Spec.ParamRef.Selector != nil {
				pr = metav1.FormatLabelSelector(b.Spec.ParamRef.Selector)
			}
		}
		return []any{b.Spec.PolicyName, pr}
	},
}
