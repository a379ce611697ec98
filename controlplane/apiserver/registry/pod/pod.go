// Package pod is the pods resource: its strategy (status reset on create, mostly immutable spec,
// graceful deletion), its selectable fields (spec.nodeName, status.phase...), and the binding, status,
// ephemeralcontainers, log, exec, attach and portforward subresources.
package pod

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
	"github.com/nodekit/nodekit/internal/podspec"
)

// Fields returns a pod's selectable fields (kube-apiserver's pod ToSelectableFields).
func Fields(obj runtime.Object) fields.Set {
	p := obj.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// NewStorage returns the pods endpoints: "pods", "pods/status", "pods/binding", "pods/ephemeralcontainers" (get, update and patch
// of spec.ephemeralContainers only), plus "pods/log",
// "pods/exec", "pods/attach" and "pods/portforward" proxied through kubelets (nil kubelets leaves those
// out); authz is the API server's authorizer, which the streams ask whether a GET upgrade's user may
// also "create" them.
func NewStorage(getter generic.RESTOptionsGetter, kubelets KubeletConnection, authz authorizer.Authorizer) (map[string]rest.Storage, *store.REST, error) {
	s := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.PodCreate(o.(*corev1.Pod)) })
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.PodUpdate(o.(*corev1.Pod), old.(*corev1.Pod))
	}
	s.PrepareCreateFn = func(_ context.Context, o runtime.Object) {
		p := o.(*corev1.Pod)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		setSchedulingGated(p)
		mergeMatchLabelKeys(p)
		p.Status.QOSClass = podspec.ComputeQOSClass(p)
	}
	s.GracefulDeleteFn = checkGracefulDelete
	main, status, err := store.New(getter, store.Spec{
		Resource: corev1.Resource("pods"),
		// pods/status keeps the stored deletion timestamp and owner references, as upstream's
		// podStatusStrategy.
		StatusMetadata: store.StatusResetsOwnership,
		Singular:       "pod",
		ShortNames:     []string{"po"},
		Categories:     []string{"all"},
		NewFunc:        func() runtime.Object { return &corev1.Pod{} },
		NewList:        func() runtime.Object { return &corev1.PodList{} },
		Strategy:       s,
		Fields:         Fields,
		Table:          tableConvertor,
	})
	if err != nil {
		return nil, nil, err
	}
	m := map[string]rest.Storage{
		"pods":                     main,
		"pods/status":              status,
		"pods/binding":             &BindingREST{store: main},
		"pods/ephemeralcontainers": store.Subresource(main, &ephemeralStrategy{store.StatusStrategy{Strategy: s, ValidateStatusFn: validateEphemeralUpdate}}),
	}
	if kubelets != nil {
		m["pods/log"] = &LogREST{store: main, kubelets: kubelets}
		st := streamREST{store: main, kubelets: kubelets, authz: authz}
		m["pods/exec"] = &ExecREST{st}
		m["pods/attach"] = &AttachREST{st}
		m["pods/portforward"] = &PortForwardREST{st}
	}
	return m, main, nil
}

// checkGracefulDelete implements graceful pod deletion: the grace period is the request's, else
// spec.terminationGracePeriodSeconds; pods never scheduled or already terminated go at once (0).
func checkGracefulDelete(_ context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	p := obj.(*corev1.Pod)
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		period = *p.Spec.TerminationGracePeriodSeconds
	}
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	}
	if p.Spec.NodeName == "" || podspec.IsTerminal(p.Status.Phase) {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}

// BindingREST is pods/binding: the scheduler's way of setting spec.nodeName exactly once.
type BindingREST struct {
	store *store.REST
}

// New returns an empty Binding.
func (r *BindingREST) New() runtime.Object { return &corev1.Binding{} }

// Destroy is a no-op.
func (r *BindingREST) Destroy() {}

var _ rest.NamedCreater = &BindingREST{}

// Create binds pod name to binding.target.name: 409 Conflict if the pod is already bound or being deleted;
// a pod with scheduling gates is refused (409) too; it sets the PodScheduled condition to True.
func (r *BindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding: %T", obj))
	}
	if b.Name != "" && b.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})})
	}
	if b.Target.Name == "" {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	if createValidation != nil {
		if err := createValidation(ctx, b.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	key, err := r.store.KeyFunc(ctx, name)
	if err != nil {
		return nil, err
	}
	var precond *storage.Preconditions
	if b.UID != "" {
		precond = &storage.Preconditions{UID: &b.UID}
	}
	dryRun := options != nil && len(options.DryRun) > 0
	err = r.store.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, precond, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if p.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %s is already assigned to node %q", name, p.Spec.NodeName))
		}
		if len(p.Spec.SchedulingGates) != 0 {
			return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %s has non-empty .spec.schedulingGates", name))
		}
		p.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
		setScheduled(p)
		return p, nil
	}), dryRun, nil)
	if err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

// setScheduled sets PodScheduled=True, dropping the reason and message of an earlier False (Unschedulable,
// SchedulingGated).
func setScheduled(p *corev1.Pod) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			p.Status.Conditions[i] = cond
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
}
