package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// registerAdmissionRegistration adds the admissionregistration.k8s.io/v1 defaults
// (k8s.io/kubernetes pkg/apis/admissionregistration/v1/defaults.go).
func registerAdmissionRegistration(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingWebhookConfiguration{}, func(o any) {
		for i := range o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[i]
			webhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, &w.ClientConfig, w.Rules)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingWebhookConfiguration{}, func(o any) {
		for i := range o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[i]
			webhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, &w.ClientConfig, w.Rules)
			if w.ReinvocationPolicy == nil {
				w.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
			}
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicy{}, func(o any) {
		spec := &o.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
		if spec.FailurePolicy == nil {
			spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		matchResources(spec.MatchConstraints)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(o any) {
		matchResources(o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicy{}, func(o any) {
		spec := &o.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec
		if spec.FailurePolicy == nil {
			spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		matchResources(spec.MatchConstraints)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, func(o any) {
		matchResources(o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec.MatchResources)
	})
}

// webhook defaults one webhook of a configuration: failurePolicy Fail, matchPolicy Equivalent, empty
// (match-all) selectors, timeoutSeconds 10, service port 443 and rule scope "*".
func webhook(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType, ns, obj **metav1.LabelSelector,
	timeout **int32, cc *admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) {
	if *fp == nil {
		*fp = ptr.To(admissionregistrationv1.Fail)
	}
	if *mp == nil {
		*mp = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
	for i := range rules {
		ruleScope(&rules[i].Rule)
	}
}

func ruleScope(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		r.Scope = ptr.To(admissionregistrationv1.AllScopes)
	}
}

// matchResources defaults a policy's or binding's matchConstraints/matchResources (when set).
func matchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		ruleScope(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		ruleScope(&m.ExcludeResourceRules[i].Rule)
	}
}
