// Package admission holds the API server's admission plugins, run after authorization and before
// storage, in kube-apiserver's order: NamespaceLifecycle, LimitRanger (defaults, then limits),
// ServiceAccount (default account, token volume), NodeRestriction, Priority (pods' spec.priority from
// their PriorityClass; one globalDefault class), DefaultTolerationSeconds,
// DefaultStorageClass and StorageObjectInUseProtection (mutating), then k8s.io/apiserver's dynamic
// admission: MutatingAdmissionPolicy and MutatingAdmissionWebhook (mutating, last of the mutating
// phase), ValidatingAdmissionPolicy and ValidatingAdmissionWebhook (validating), and k8s.io/apiserver's
// ResourceQuota (validating, last) with the evaluators of controlplane/quota. Defaulting and
// per-kind validation are not plugins here: defaulting runs when the request body is decoded (package
// defaults) and validation in each resource's strategy (package validation), as in kube-apiserver.
package admission

import (
	"io"

	"k8s.io/apiserver/pkg/admission"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// Chain returns the admission chain; nodeRestriction carries the pod and node getters its plugin reads,
// priority the PriorityClass readers, and dynamic what the webhook and policy plugins need. The plugins are in kube-apiserver's order
// (AllOrderedPlugins) and built through k8s.io/apiserver's plugin registry, whose chain runs every
// mutating plugin, then every validating one, and re-runs the mutating plugins once when a mutating
// webhook or policy with reinvocationPolicy IfNeeded asks for it.
func Chain(namespaces NamespaceGetter, nodeRestriction NodeRestriction, tolerationSeconds int64, classes storagelisters.StorageClassLister, priority *Priority, dynamic Dynamic) (admission.Interface, error) {
	plugins := admission.NewPlugins()
	static := func(name string, p admission.Interface) {
		plugins.Register(name, func(io.Reader) (admission.Interface, error) { return p, nil })
	}
	static("NamespaceLifecycle", &NamespaceLifecycle{Namespaces: namespaces})
	static("LimitRanger", NewLimitRanger())
	static("ServiceAccount", NewServiceAccount())
	static("Priority", priority)
	static("DefaultTolerationSeconds", &DefaultTolerationSeconds{Seconds: tolerationSeconds})
	static("NodeRestriction", nodeRestriction)
	static("DefaultStorageClass", &DefaultStorageClass{Classes: classes})
	static("StorageObjectInUseProtection", StorageObjectInUseProtection{})
	mutatingpolicy.Register(plugins)
	mutating.Register(plugins)
	validatingpolicy.Register(plugins)
	validating.Register(plugins)
	resourcequota.Register(plugins)
	inits, err := dynamic.initializers()
	if err != nil {
		return nil, err
	}
	return plugins.NewFromPlugins([]string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "NodeRestriction", "Priority", "DefaultTolerationSeconds",
		"DefaultStorageClass", "StorageObjectInUseProtection", mutatingpolicy.PluginName, mutating.PluginName, validatingpolicy.PluginName,
		validating.PluginName, resourcequota.PluginName}, noConfig{}, inits, nil)
}

// noConfig gives every plugin an empty configuration (no --admission-control-config-file).
type noConfig struct{}

// ConfigFor implements admission.ConfigProvider.
func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }
