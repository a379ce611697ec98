// Package podspec holds the pod semantics that the control plane and the node agent must agree on, so
// that each is defined once: the QoS class (QOSClass, ComputeQOSClass), the API defaults of a pod spec
// and its containers (Default, DefaultContainer, DefaultPullPolicy), and whether a pod phase is terminal
// (IsTerminal). Behaviour follows upstream Kubernetes (k8s.io/kubernetes pkg/apis/core/v1/defaults.go,
// pkg/apis/core/v1/helper/qos, k8s.io/component-helpers/resource). It imports only k8s.io/api,
// k8s.io/apimachinery and the standard library, and nothing of nodekit.
package podspec

import (
	v1 "k8s.io/api/core/v1"
)

// IsTerminal reports whether phase is one a pod never leaves: Succeeded or Failed.
func IsTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}
