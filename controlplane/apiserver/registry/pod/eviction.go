package pod

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/retry"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/internal/podspec"
)

// MaxDisruptedPods is the most entries a budget's status.disruptedPods may hold before evictions
// through it are refused (upstream MaxDisruptedPodSize).
const MaxDisruptedPods = 2000

// EvictionREST is pods/eviction (policy/v1 Eviction): it deletes a pod unless that would violate
// the pod's PodDisruptionBudget, as kube-apiserver's eviction REST does. A pod that is terminal,
// Pending or already terminating is always evicted; otherwise the one budget whose selector matches
// the pod must allow a disruption (the eviction records the pod in status.disruptedPods and takes
// one from status.disruptionsAllowed, so concurrent evictions cannot both pass) or the request gets
// 429 TooManyRequests. More than one matching budget is a 500, as upstream. Before the delete, the
// pod gets the condition DisruptionTarget=True (reason EvictionByEvictionAPI, message "Eviction API:
// evicting"), as upstream's, so that a Job's podFailurePolicy can tell an eviction from a failure.
type EvictionREST struct {
	pods *store.REST
	// podStatus writes the DisruptionTarget condition.
	podStatus rest.Updater
	// pdbs lists budgets; pdbStatus updates their status.
	pdbs      rest.Lister
	pdbStatus rest.Updater
}

// NewEvictionREST returns pods/eviction over the pod store, the pods' /status endpoint (for the
// DisruptionTarget condition), the budget store (for listing) and the budgets' /status endpoint (for
// the disruption bookkeeping).
func NewEvictionREST(pods *store.REST, podStatus rest.Updater, pdbs rest.Lister, pdbStatus rest.Updater) *EvictionREST {
	return &EvictionREST{pods: pods, podStatus: podStatus, pdbs: pdbs, pdbStatus: pdbStatus}
}

var (
	_ rest.NamedCreater             = &EvictionREST{}
	_ rest.GroupVersionKindProvider = &EvictionREST{}
)

// New returns an empty Eviction.
func (r *EvictionREST) New() runtime.Object { return &policyv1.Eviction{} }

// Destroy is a no-op.
func (r *EvictionREST) Destroy() {}

// GroupVersionKind is policy/v1 Eviction, whatever group serves pods.
func (r *EvictionREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

// Create evicts pod name. The Eviction's deleteOptions are passed to the delete (grace period,
// preconditions, dry run); when the budget was consulted, the delete is made conditional on the
// pod's resourceVersion checked against it.
func (r *EvictionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Eviction: %T", obj))
	}
	if ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if createValidation != nil {
		if err := createValidation(ctx, ev.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	delOpts := &metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		delOpts = ev.DeleteOptions.DeepCopy()
	}
	if options != nil && len(options.DryRun) > 0 {
		delOpts.DryRun = options.DryRun
	}
	dryRun := len(delOpts.DryRun) > 0
	var checked *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		checked = nil
		obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod := obj.(*corev1.Pod)
		if canIgnoreBudget(pod) {
			return nil
		}
		pdb, err := r.budgetOf(ctx, pod)
		if err != nil || pdb == nil {
			return err
		}
		if !podReady(pod) {
			policy := policyv1.IfHealthyBudget
			if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
				policy = *pdb.Spec.UnhealthyPodEvictionPolicy
			}
			if policy == policyv1.AlwaysAllow ||
				pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.ObservedGeneration >= pdb.Generation {
				checked = pod
				return nil
			}
		}
		if err := checkBudget(pdb); err != nil {
			return err
		}
		checked = pod
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod.Name] = metav1.Time{Time: time.Now()}
		if dryRun {
			return nil
		}
		_, _, err = r.pdbStatus.Update(ctx, pdb.Name, rest.DefaultUpdatedObjectInfo(pdb), nil, nil, false, &metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if checked != nil {
		if delOpts.Preconditions == nil {
			delOpts.Preconditions = &metav1.Preconditions{}
		}
		if delOpts.Preconditions.ResourceVersion == nil {
			rv := checked.ResourceVersion
			delOpts.Preconditions.ResourceVersion = &rv
		}
	}
	if !dryRun {
		if err := r.markDisruptionTarget(ctx, name, delOpts); err != nil {
			return nil, err
		}
	}
	if _, _, err := r.pods.Delete(ctx, name, rest.ValidateAllObjectFunc, delOpts); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// markDisruptionTarget sets DisruptionTarget=True on the stored pod name through /status, checking
// the delete's preconditions (uid, resourceVersion) against it first (409 when they fail); a
// resourceVersion precondition then moves to the updated pod's, as upstream's eviction does.
func (r *EvictionREST) markDisruptionTarget(ctx context.Context, name string, delOpts *metav1.DeleteOptions) error {
	pre := delOpts.Preconditions
	latest := func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
		pod := old.(*corev1.Pod).DeepCopy()
		if pre != nil && pre.UID != nil && *pre.UID != "" && *pre.UID != pod.UID {
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pre.UID, pod.UID))
		}
		if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != "" && *pre.ResourceVersion != pod.ResourceVersion {
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pre.ResourceVersion, pod.ResourceVersion))
		}
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()}
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type })
		switch {
		case i < 0:
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		case pod.Status.Conditions[i].Status == cond.Status:
			cond.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
			fallthrough
		default:
			pod.Status.Conditions[i] = cond
		}
		return pod, nil
	}
	updated, _, err := r.podStatus.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, latest), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != "" {
		rv := updated.(*corev1.Pod).ResourceVersion
		pre.ResourceVersion = &rv
	}
	return nil
}

// budgetOf is the one PodDisruptionBudget in the pod's namespace whose selector matches its labels
// (nil when none; as in policy/v1 a nil selector matches nothing and an empty one every pod).
func (r *EvictionREST) budgetOf(ctx context.Context, pod *corev1.Pod) (*policyv1.PodDisruptionBudget, error) {
	obj, err := r.pdbs.List(genericapirequest.WithNamespace(ctx, pod.Namespace), &metainternalversion.ListOptions{})
	if err != nil {
		return nil, err
	}
	var found []policyv1.PodDisruptionBudget
	for _, pdb := range obj.(*policyv1.PodDisruptionBudgetList).Items {
		if pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		found = append(found, pdb)
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	return nil, apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
}

// checkBudget refuses an eviction the budget does not allow now (upstream checkAndDecrement).
func checkBudget(pdb *policyv1.PodDisruptionBudget) error {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return tooMany(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > MaxDisruptedPods {
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		return tooMany(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
	}
	return nil
}

// tooMany is the 429 an eviction blocked by its budget gets, with the budget's reason as a
// DisruptionBudget cause.
func tooMany(cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

// canIgnoreBudget: evicting a terminal, Pending or terminating pod disrupts nothing more.
func canIgnoreBudget(p *corev1.Pod) bool {
	return podspec.IsTerminal(p.Status.Phase) || p.Status.Phase == corev1.PodPending || p.DeletionTimestamp != nil
}

// podReady is the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
