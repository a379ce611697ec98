// Package admissionregistration is admissionregistration.k8s.io/v1, cluster-scoped:
// validatingwebhookconfigurations, mutatingwebhookconfigurations, validatingadmissionpolicies (with
// /status), validatingadmissionpolicybindings, mutatingadmissionpolicies and
// mutatingadmissionpolicybindings. The admission chain (package admission) acts on them:
// the webhook and policy plugins of k8s.io/apiserver watch these objects and call the webhooks or run the
// policies' CEL validations and mutations. Validation is package validation's (field errors, CEL compiled on write).
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
		StatusMetadata: store.StatusResetsObjectMeta,
		Categories:     []string{"api-extensions"},
		NewFunc:        func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		NewList:        func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
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
		Table: bindingTable(func(o runtime.Object) (string, *admissionregistrationv1.ParamRef) {
			b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
			return b.Spec.PolicyName, b.Spec.ParamRef
		})})
	if err != nil {
		return nil, err
	}
	mapol, _, err := store.New(getter, store.Spec{Resource: gr("mutatingadmissionpolicies"), Singular: "mutatingadmissionpolicy",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
		Strategy: store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
			return validation.MutatingAdmissionPolicy(o.(*admissionregistrationv1.MutatingAdmissionPolicy))
		}),
		Table: mutatingPolicyTable})
	if err != nil {
		return nil, err
	}
	mapb, _, err := store.New(getter, store.Spec{Resource: gr("mutatingadmissionpolicybindings"), Singular: "mutatingadmissionpolicybinding",
		Categories: []string{"api-extensions"},
		NewFunc:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
		NewList:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
		Strategy: store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
			return validation.MutatingAdmissionPolicyBinding(o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding))
		}),
		Table: bindingTable(func(o runtime.Object) (string, *admissionregistrationv1.ParamRef) {
			b := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
			return b.Spec.PolicyName, b.Spec.ParamRef
		})})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"mutatingadmissionpolicies": mapol, "mutatingadmissionpolicybindings": mapb,
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

// policyTable is `kubectl get` of a ValidatingAdmissionPolicy: NAME, VALIDATIONS, PARAMKIND, AGE.
var policyTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Validations", "the number of spec.validations"),
		store.Column("ParamKind", "spec.paramKind, or <unset>"),
	},
	Cells: func(o runtime.Object) []any {
		p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		return []any{int64(len(p.Spec.Validations)), paramKindCell(p.Spec.ParamKind)}
	},
}

// mutatingPolicyTable is `kubectl get` of a MutatingAdmissionPolicy: NAME, MUTATIONS, PARAMKIND, AGE.
var mutatingPolicyTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Mutations", "the number of spec.mutations"),
		store.Column("ParamKind", "spec.paramKind, or <unset>"),
	},
	Cells: func(o runtime.Object) []any {
		p := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
		return []any{int64(len(p.Spec.Mutations)), paramKindCell(p.Spec.ParamKind)}
	},
}

func paramKindCell(pk *admissionregistrationv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return pk.APIVersion + "/" + pk.Kind
}

// bindingTable is `kubectl get` of a policy binding: NAME, POLICYNAME, PARAMREF, AGE; spec returns the
// binding's spec.policyName and spec.paramRef.
func bindingTable(spec func(runtime.Object) (string, *admissionregistrationv1.ParamRef)) store.Table {
	return store.Table{
		Columns: []metav1.TableColumnDefinition{
			store.Column("PolicyName", "spec.policyName"),
			store.Column("ParamRef", "spec.paramRef, or <unset>"),
		},
		Cells: func(o runtime.Object) []any {
			name, pr := spec(o)
			ref := "<unset>"
			if pr != nil {
				ref = pr.Namespace + "/" + pr.Name
				if pr.Selector != nil {
					ref = metav1.FormatLabelSelector(pr.Selector)
				}
			}
			return []any{name, ref}
		},
	}
}
