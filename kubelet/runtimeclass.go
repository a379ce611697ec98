package kubelet

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	nodelisters "k8s.io/client-go/listers/node/v1"
)

// runtimeHandler returns the CRI runtime handler of pod's RuntimeClass from the kubelet's RuntimeClass
// informer (upstream's runtimeclass.Manager.LookupRuntimeHandler): "" when the pod names no class, an
// error naming the class when it does not exist (the sandbox is then not created, and the pod worker
// retries while the pod stays Pending).
func runtimeHandler(classes nodelisters.RuntimeClassLister, pod *v1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := classes.Get(name)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("RuntimeClass %q not found", name)
	}
	if err != nil {
		return "", fmt.Errorf("looking up RuntimeClass %q: %w", name, err)
	}
	return rc.Handler, nil
}
