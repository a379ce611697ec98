// Package nsutil answers, for controllers that put an object into every namespace (the default
// ServiceAccount, the root CA ConfigMap), whether a namespace should get it and whether a failed create
// only means the namespace is going away.
package nsutil

import (
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Active returns the namespace name from lister when it exists and is not terminating. A missing or
// terminating namespace gives ok false and a nil error; other lister errors are returned.
func Active(lister corelisters.NamespaceLister, name string) (ns *v1.Namespace, ok bool, err error) {
	ns, err = lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ns.Status.Phase == v1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return ns, false, nil
	}
	return ns, true, nil
}

// Gone reports whether a create in a namespace failed because the namespace is gone or terminating
// (NamespaceLifecycle admission refuses creates there: NotFound, or Forbidden with the
// NamespaceTerminating cause), which is no reason to retry. Any other Forbidden is not: an RBAC denial
// (the controller's grants not yet reconciled while the server bootstraps) must be retried, as upstream's
// controllers do.
func Gone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause)
}
