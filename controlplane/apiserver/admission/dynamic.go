package admission

import (
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"

	"github.com/nodekit/nodekit/controlplane/quota"
)

// Dynamic is what the dynamic admission plugins (admission webhooks, MutatingAdmissionPolicy and
// ValidatingAdmissionPolicy) and ResourceQuota (a client for status updates and the quota informer) need.
// Informers must be started (after the server starts) for the plugins to become ready; until their
// caches sync they refuse requests with "not yet ready to handle request", as in kube-apiserver.
type Dynamic struct {
	// Loopback is the API server's own client configuration (system:masters); Client and Dynamic are
	// clients over it. Webhooks of the `kubernetes` service in `default` are called through it.
	Loopback *rest.Config
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	// Informers is a shared informer factory over Loopback: the plugins read webhook configurations,
	// policies, bindings, namespaces, services and endpoint slices from it.
	Informers informers.SharedInformerFactory
	// Authorizer answers the policies' `authorizer` CEL variable.
	Authorizer authorizer.Authorizer
	// RESTMapper maps a policy's matchConstraints and paramKind to resources (discovery-based).
	RESTMapper meta.RESTMapper
	// EffectiveVersion is the API server's version (the CEL environment's compatibility version).
	EffectiveVersion compatibility.EffectiveVersion
	// Stop ends the plugins' background work (the server's shutdown).
	Stop <-chan struct{}
}

// initializers returns what k8s.io/apiserver's MutatingAdmissionPolicy, MutatingAdmissionWebhook,
// ValidatingAdmissionPolicy and ValidatingAdmissionWebhook plugins are initialized with. Webhooks with clientConfig.service are called
// on a ready endpoint of the service (the API server does not route ClusterIPs: kube-apiserver's
// --enable-aggregator-routing), verified against the webhook's caBundle for the name
// <service>.<namespace>.svc, and with no client credentials (no webhook kubeconfig).
func (d Dynamic) initializers() (admission.PluginInitializers, error) {
	resolver, err := NewServiceResolver(d.Informers, d.Loopback)
	if err != nil {
		return nil, err
	}
	generic := initializer.New(d.Client, d.Dynamic, d.Informers, d.Authorizer, utilfeature.DefaultFeatureGate,
		d.EffectiveVersion, d.Stop, d.RESTMapper)
	webhooks := webhookinit.NewPluginInitializer(
		webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, d.Loopback, noop.NewTracerProvider()), resolver)
	return admission.PluginInitializers{initializer.NewAPIServerIDInitializer("nodekit-apiserver"), generic, webhooks, excluded{},
		quotaConfiguration{}}, nil
}

// quotaConfiguration gives the ResourceQuota plugin nodekit's evaluators (controlplane/quota, shared
// with the resource quota controller) and ignored resources. It runs after the generic initializer,
// which sets the plugin's stop channel that SetQuotaConfiguration needs.
type quotaConfiguration struct{}

// Initialize implements admission.PluginInitializer.
func (quotaConfiguration) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsQuotaConfiguration); ok {
		w.SetQuotaConfiguration(quota.Configuration(nil))
	}
}

// excluded keeps the policy plugins off the review resources that are not stored (as kube-apiserver's
// exclusion list): intercepting them could lock authentication and authorization out.
type excluded struct{}

// Initialize implements admission.PluginInitializer.
func (excluded) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsExcludedAdmissionResources); ok {
		w.SetExcludedAdmissionResources([]schema.GroupResource{
			{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
			{Group: "authentication.k8s.io", Resource: "tokenreviews"},
			{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
			{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
			{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
			{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
		})
	}
}

// NewServiceResolver returns the resolver that webhooks with clientConfig.service are called through:
// admission webhooks and CRD conversion webhooks alike. It resolves a Service port to one of its ready
// endpoints (its EndpointSlices, pod IP and target port), not to its ClusterIP: the API server does not
// run the service proxy, so a ClusterIP leads nowhere from it (kube-apiserver's
// --enable-aggregator-routing); the `kubernetes` Service in `default` resolves to the API server itself
// (loopback's host). informers must be started for it to answer; an unparseable loopback host is an error.
func NewServiceResolver(informers informers.SharedInformerFactory, loopback *rest.Config) (webhook.ServiceResolver, error) {
	slices, err := proxy.NewEndpointSliceIndexerGetter(informers.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, err
	}
	host, err := url.Parse(loopback.Host)
	if err != nil {
		return nil, fmt.Errorf("admission: loopback host: %w", err)
	}
	return &endpointResolver{services: informers.Core().V1().Services().Lister(), slices: slices, loopback: host}, nil
}

// endpointResolver resolves a webhook's service to one of its ready endpoints (its EndpointSlices), and
// the `kubernetes` service in `default` to the API server itself.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   proxy.EndpointSliceGetter
	loopback *url.URL
}

// ResolveEndpoint implements webhook.ServiceResolver.
func (r *endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if namespace == "default" && name == "kubernetes" && port == 443 {
		return r.loopback, nil
	}
	return proxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}
