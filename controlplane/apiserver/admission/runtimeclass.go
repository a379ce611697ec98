package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
)

// RuntimeClass is Kubernetes' RuntimeClass plugin, for new pods that set spec.runtimeClassName:
// a class that does not exist refuses the pod (403 "pod rejected: RuntimeClass \"x\" not found"); the
// class's overhead.podFixed becomes the pod's spec.overhead (refused when the pod sets a different one,
// or sets one the class does not define); its scheduling.nodeSelector is merged into the pod's (a key
// with another value refused) and its tolerations are appended (redundant ones dropped).
type RuntimeClass struct {
	// Lister is the informer's view; Client is asked when it has not seen a class yet, as upstream.
	Lister nodelisters.RuntimeClassLister
	Client nodev1client.RuntimeClassInterface
}

var (
	_ admission.MutationInterface   = &RuntimeClass{}
	_ admission.ValidationInterface = &RuntimeClass{}
)

// Handles pod creation.
func (p *RuntimeClass) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit sets the pod's overhead and merges the class's scheduling constraints.
func (p *RuntimeClass) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, rc, err := p.objects(ctx, a)
	if err != nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	s := rc.Scheduling
	if s == nil {
		return nil
	}
	if pod.Spec.NodeSelector == nil && len(s.NodeSelector) > 0 {
		pod.Spec.NodeSelector = map[string]string{}
	}
	for k, v := range s.NodeSelector {
		if pv, ok := pod.Spec.NodeSelector[k]; ok && pv != v {
			return admission.NewForbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, pv))
		}
		pod.Spec.NodeSelector[k] = v
	}
	pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	return nil
}

// Validate refuses a pod whose overhead is not its class's (after every mutating plugin and webhook).
func (p *RuntimeClass) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, rc, err := p.objects(ctx, a)
	if err != nil || pod == nil {
		return err
	}
	if rc != nil && rc.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
	} else if pod.Spec.Overhead != nil {
		return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

// objects returns the pod being created (nil for other requests) and the class it names (nil if none).
func (p *RuntimeClass) objects(ctx context.Context, a admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil, nil, nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil, nil, apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := p.Lister.Get(name)
	if apierrors.IsNotFound(err) {
		rc, err = p.Client.Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, admission.NewForbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, nil, admission.NewForbidden(a, fmt.Errorf("pod rejected: reading RuntimeClass %q: %w", name, err))
	}
	return pod, rc, nil
}

// mergeTolerations appends second to first, dropping every toleration another one already covers
// (upstream pkg/util/tolerations.MergeTolerations).
func mergeTolerations(first, second []corev1.Toleration) []corev1.Toleration {
	all := append(append([]corev1.Toleration{}, first...), second...)
	var merged []corev1.Toleration
next:
	for i, t := range all {
		for _, m := range merged {
			if tolerationCovers(m, t) {
				continue next
			}
		}
		for _, later := range all[i+1:] {
			if !apiequality.Semantic.DeepEqual(t, later) && tolerationCovers(later, t) {
				continue next
			}
		}
		merged = append(merged, t)
	}
	return merged
}

// tolerationCovers reports whether ss tolerates every taint t tolerates (upstream isSuperset).
func tolerationCovers(ss, t corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(t, ss) {
		return true
	}
	if t.Key != ss.Key && (ss.Key != "" || ss.Operator != corev1.TolerationOpExists) {
		return false
	}
	if t.Effect != ss.Effect && ss.Effect != "" {
		return false
	}
	if ss.Effect == corev1.TaintEffectNoExecute && ss.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *ss.TolerationSeconds) {
		return false
	}
	switch ss.Operator {
	case corev1.TolerationOpEqual, "":
		return t.Operator == corev1.TolerationOpEqual && t.Value == ss.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}
