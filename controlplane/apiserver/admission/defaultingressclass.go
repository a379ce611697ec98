package admission

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	networkinglisters "k8s.io/client-go/listers/networking/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// DefaultIngressClass is Kubernetes' DefaultIngressClass plugin: a new Ingress that names no class
// (neither spec.ingressClassName nor the kubernetes.io/ingress.class annotation) gets the default
// IngressClass, the one annotated ingressclass.kubernetes.io/is-default-class=true (the newest when
// several are; none when there is none).
type DefaultIngressClass struct {
	Classes networkinglisters.IngressClassLister
}

var _ admission.MutationInterface = &DefaultIngressClass{}

// Handles Ingress creation.
func (p *DefaultIngressClass) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit sets the default class on an Ingress without one.
func (p *DefaultIngressClass) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != networkingv1.Resource("ingresses") || a.GetSubresource() != "" {
		return nil
	}
	ing, ok := a.GetObject().(*networkingv1.Ingress)
	if !ok || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[validation.AnnotationIngressClass]; ok {
		return nil
	}
	classes, err := p.Classes.List(labels.Everything())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("listing ingress classes: %w", err))
	}
	if def := newestDefault(classes, networkingv1.AnnotationIsDefaultIngressClass); def != nil {
		name := def.Name
		ing.Spec.IngressClassName = &name
	}
	return nil
}

// newestDefault returns the newest of objs annotated annotation=true (by creation time, then by name),
// or nil: upstream's choice of a default StorageClass or IngressClass.
func newestDefault[T metav1.Object](objs []T, annotation string) T {
	var def T
	found := false
	for _, o := range objs {
		if o.GetAnnotations()[annotation] != "true" {
			continue
		}
		if !found {
			def, found = o, true
			continue
		}
		c, d := o.GetCreationTimestamp(), def.GetCreationTimestamp()
		if c.After(d.Time) || (c.Equal(&d) && o.GetName() < def.GetName()) {
			def = o
		}
	}
	return def
}
