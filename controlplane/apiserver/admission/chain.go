// Package admission holds the API server's admission plugins, run after authorization and before
// storage, in order: DefaultTolerationSeconds (mutating), NamespaceLifecycle and NodeRestriction
// (validating). Defaulting and per-kind validation are not plugins here: defaulting runs when the request
// body is decoded (package defaults) and validation in each resource's strategy (package validation), as in
// kube-apiserver.
package admission

import (
	"k8s.io/apiserver/pkg/admission"
)

// Chain returns the admission chain; nodeRestriction carries the pod and node getters its plugin reads.
func Chain(namespaces NamespaceGetter, nodeRestriction NodeRestriction, tolerationSeconds int64) admission.Interface {
	return admission.NewChainHandler(
		&DefaultTolerationSeconds{Seconds: tolerationSeconds},
		&NamespaceLifecycle{Namespaces: namespaces},
		nodeRestriction,
	)
}
