// Package crd serves apiextensions.k8s.io/v1 CustomResourceDefinitions and the custom resources they
// define, through k8s.io/apiextensions-apiserver, chained the way kube-apiserver chains it: the
// apiextensions server is the delegate of nodekit's generic API server, built from a shallow copy of
// the same config, so every request to /apis/apiextensions.k8s.io and to a custom resource passes the
// same authentication, authorization and admission chain and lands in the same etcd (CRDs under
// /registry/apiextensions.k8s.io/customresourcedefinitions, custom objects under
// /registry/<group>/<plural>). The library does the rest: structural schema validation, pruning and
// defaulting, the status and scale subresources, printer columns, the Established/NamesAccepted
// conditions and the finalizer that deletes a CRD's objects with it.
//
// The glue here is what kube-apiserver's aggregator would otherwise add: the CRD groups in the
// unaggregated /apis list (discovery.go) and the CRD schemas in the top server's /openapi/v2 and
// /openapi/v3 (openapi.go).
package crd

import (
	"fmt"
	"maps"

	"go.opentelemetry.io/otel/trace/noop"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	storagevalue "k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/kube-openapi/pkg/common"
)

// Options build the CustomResourceDefinitions server.
type Options struct {
	// Generic is the top (nodekit) server's config, after authentication, authorization, admission,
	// the loopback client and the shared AggregatedDiscoveryGroupManager are set and before Complete.
	// It is copied, not changed.
	Generic genericapiserver.Config
	// Storage is the etcd3 backend (transport and the /registry prefix); its codec is replaced.
	Storage storagebackend.Config
	// Transformers encrypt the values of the resources --encryption-provider-config lists (CRDs and
	// custom resources among them); nil stores values as they are.
	Transformers storagevalue.ResourceTransformers
	// Definitions are the top server's OpenAPI definitions; the apiextensions types are added to them.
	Definitions common.GetOpenAPIDefinitions
	// Scheme names the top server's types in OpenAPI (with the apiextensions scheme).
	Scheme *runtime.Scheme
	// Resolver resolves a conversion webhook's Service (CRD spec.conversion.webhook.clientConfig.service)
	// to the address it is called on; the admission webhooks' resolver (admission.NewServiceResolver).
	Resolver webhook.ServiceResolver
}

// Server is the apiextensions server, the top server's delegate.
type Server struct {
	ext *apiextensionsapiserver.CustomResourceDefinitions
	// v3 is the OpenAPI v3 config the apiextensions group's document is built with.
	v3 *common.OpenAPIV3Config
}

// New builds the apiextensions server on a copy of o.Generic: CRDs stored as apiextensions.k8s.io/v1
// JSON, custom objects as JSON, the library's own controllers (naming, establishing, non-structural
// schema, API approval, finalizer, discovery, OpenAPI) as its post-start hooks, which the top server
// runs. Unknown paths fall through to a 404 (503 until every route is installed), as in kube-apiserver.
func New(o Options) (*Server, error) {
	if o.Generic.LoopbackClientConfig == nil || o.Resolver == nil || o.Definitions == nil || o.Scheme == nil {
		return nil, fmt.Errorf("apiextensions: the loopback client config, the service resolver, the OpenAPI definitions and the scheme are required")
	}
	generic := o.Generic // shallow copy: authn, authz, admission, serving and the lifecycle signals are shared
	generic.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	generic.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()

	crdStorage := o.Storage
	crdStorage.Codec = apiextensionsapiserver.Codecs.LegacyCodec(apiextensionsv1.SchemeGroupVersion)
	crdStorage.EncodeVersioner = runtime.NewMultiGroupVersioner(apiextensionsv1.SchemeGroupVersion, schema.GroupKind{Group: apiextensionsv1.GroupName})
	crdEtcd := genericoptions.NewEtcdOptions(&crdStorage)
	crdEtcd.SkipHealthEndpoints = true // the top server has its own etcd checks
	generic.RESTOptionsGetter = crdEtcd.CreateRESTOptionsGetter(&genericoptions.SimpleStorageFactory{StorageConfig: crdStorage}, o.Transformers)

	defs := func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		out := o.Definitions(ref)
		maps.Copy(out, apiextensionsopenapi.GetOpenAPIDefinitions(ref))
		return out
	}
	namer := apiopenapi.NewDefinitionNamer(apiextensionsapiserver.Scheme, o.Scheme)
	generic.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
	generic.OpenAPIConfig.Info.Title = "nodekit"
	generic.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	generic.OpenAPIV3Config.Info.Title = "nodekit"

	cfg := &apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: generic},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: apiextensionsoptions.NewCRDRESTOptionsGetter(*genericoptions.NewEtcdOptions(&o.Storage), o.Transformers, nil),
			MasterCount:          1,
			ServiceResolver:      o.Resolver,
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, generic.LoopbackClientConfig, noop.NewTracerProvider()),
		},
	}
	notFound := notfoundhandler.New(generic.Serializer, genericapifilters.NoMuxAndDiscoveryIncompleteKey)
	ext, err := cfg.Complete().New(genericapiserver.NewEmptyDelegateWithCustomHandler(notFound))
	if err != nil {
		return nil, fmt.Errorf("apiextensions: %w", err)
	}
	return &Server{ext: ext, v3: generic.OpenAPIV3Config}, nil
}

// Delegate is what the top server is built on (genericapiserver's delegation target): requests its
// own routes do not serve go on to the apiextensions server.
func (s *Server) Delegate() genericapiserver.DelegationTarget { return s.ext.GenericAPIServer }
