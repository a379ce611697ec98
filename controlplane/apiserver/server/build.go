package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	storagevalue "k8s.io/apiserver/pkg/storage/value"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/nodekit/nodekit/controlplane/apiserver/admission"
	"github.com/nodekit/nodekit/controlplane/apiserver/allocator"
	"github.com/nodekit/nodekit/controlplane/apiserver/authn"
	"github.com/nodekit/nodekit/controlplane/apiserver/authz"
	"github.com/nodekit/nodekit/controlplane/apiserver/authz/bootstrappolicy"
	nodeauthz "github.com/nodekit/nodekit/controlplane/apiserver/authz/node"
	rbacauthz "github.com/nodekit/nodekit/controlplane/apiserver/authz/rbac"
	"github.com/nodekit/nodekit/controlplane/apiserver/crd"
	"github.com/nodekit/nodekit/controlplane/apiserver/openapi"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/admissionregistration"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/apps"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/authentication"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/authorization"
	autoscalingregistry "github.com/nodekit/nodekit/controlplane/apiserver/registry/autoscaling"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/batch"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/certificates"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/events"
	apfregistry "github.com/nodekit/nodekit/controlplane/apiserver/registry/flowcontrol"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/metrics"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/namespace"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/networking"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/node"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/plain"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/pod"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/policy"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/proxyhandler"
	rbacregistry "github.com/nodekit/nodekit/controlplane/apiserver/registry/rbac"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/replicationcontroller"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/resourcequota"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/runtimeclass"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/scheduling"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/service"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/serviceaccount"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/servicecidr"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/storage"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/storagemigration"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/satoken"
	"github.com/nodekit/nodekit/controlplane/apiserver/scheme"
	"github.com/nodekit/nodekit/controlplane/etcd"
)

// build configures k8s.io/apiserver's generic server and installs every API group, on the
// CustomResourceDefinitions server (package crd) as its delegate.
func build(opts Options, ln net.Listener, pkiDir string, certs *certSet, serviceNet *net.IPNet, kubernetesIP net.IP, npBase, npSize, port int) (*genericapiserver.GenericAPIServer, *crd.Server, error) {
	cfg := genericapiserver.NewConfig(scheme.Codecs)
	cfg.EffectiveVersion = effectiveVersion()
	// Watches, proxies and the pod streams (exec, attach, port-forward, logs) last as long as their
	// client keeps them, as kube-apiserver's: no request timeout cancels them and the in-flight limits do
	// not count them.
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
		sets.NewString("attach", "exec", "proxy", "log", "portforward"))
	if opts.RequestTimeout > 0 {
		cfg.RequestTimeout = opts.RequestTimeout
	}
	if err := applyAudit(opts, cfg); err != nil {
		return nil, nil, err
	}
	serving := (&genericoptions.SecureServingOptions{
		Listener: ln,
		ServerCert: genericoptions.GeneratableKeyCert{CertKey: genericoptions.CertKey{
			CertFile: pki.CertPath(pkiDir, pki.ServingName), KeyFile: pki.KeyPath(pkiDir, pki.ServingName)}},
	}).WithLoopback()
	if err := serving.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, nil, fmt.Errorf("apiserver: serving: %w", err)
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", certs.ca.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	cfg.SecureServing.ClientCA = clientCA
	pool := x509.NewCertPool()
	pool.AddCert(certs.ca.Cert)
	saTokens, err := satoken.LoadOrCreate(pkiDir)
	if err != nil {
		return nil, nil, err
	}
	cfg.PublicAddress = net.ParseIP(opts.AdvertiseAddress)
	cfg.ExternalAddress = net.JoinHostPort(opts.AdvertiseAddress, fmt.Sprint(port))
	cfg.EnableProfiling = false
	namer := apiopenapi.NewDefinitionNamer(scheme.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "nodekit"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "nodekit"

	etcdStore := &etcd.Store{Endpoints: opts.EtcdEndpoints, CAFile: opts.EtcdCAFile, CertFile: opts.EtcdCertFile, KeyFile: opts.EtcdKeyFile}
	var transformers storagevalue.ResourceTransformers
	if opts.EncryptionProviderConfig != "" {
		if transformers, err = loadEncryption(opts.EncryptionProviderConfig); err != nil {
			return nil, nil, err
		}
	}
	getter := newRESTOptions(etcdStore, transformers)
	cli, err := (&etcd.Store{Endpoints: opts.EtcdEndpoints, CAFile: opts.EtcdCAFile, CertFile: opts.EtcdCertFile, KeyFile: opts.EtcdKeyFile}).Client()
	if err != nil {
		return nil, nil, err
	}
	ips, err := allocator.NewServiceIPs(cli, serviceNet)
	if err != nil {
		return nil, nil, err
	}
	alloc := service.Allocators{IPs: ips, NodePorts: allocator.NewNodePorts(cli, npBase, npSize)}

	core := map[string]rest.Storage{}
	merge := func(m map[string]rest.Storage) {
		for k, v := range m {
			core[k] = v
		}
	}
	nodes, nodeStore, err := node.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(nodes)
	kubelets, err := newKubeletConnection(nodeStore, certs.kubeletClient, pool)
	if err != nil {
		return nil, nil, err
	}
	// pods/proxy, services/proxy and nodes/proxy to other ports dial pod and node addresses directly:
	// the API server runs on a node or lab host, where pod CIDRs are routed.
	proxyTransport := proxyhandler.NewTransport()
	core["nodes/proxy"] = node.NewProxyREST(kubelets, proxyTransport)
	nodeGraph := nodeauthz.NewGraph()
	loopback, err := kubernetes.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("apiserver: loopback client: %w", err)
	}
	rbacInformers := informers.NewSharedInformerFactory(loopback, 0)
	rbacRules := &rbacauthz.Authorizer{
		Roles: rbacInformers.Rbac().V1().Roles().Lister(), RoleBindings: rbacInformers.Rbac().V1().RoleBindings().Lister(),
		ClusterRoles: rbacInformers.Rbac().V1().ClusterRoles().Lister(), ClusterRoleBindings: rbacInformers.Rbac().V1().ClusterRoleBindings().Lister(),
	}
	if cfg.Authorization.Authorizer, err = authz.New(nodeauthz.Authorizer{Graph: nodeGraph}, rbacRules); err != nil {
		return nil, nil, err
	}
	pods, podStore, err := pod.NewStorage(getter, kubelets, cfg.Authorization.Authorizer)
	if err != nil {
		return nil, nil, err
	}
	rbacStorage, err := rbacregistry.NewStorage(getter, &rbacregistry.Guard{Rules: rbacRules, Authorizer: cfg.Authorization.Authorizer})
	if err != nil {
		return nil, nil, err
	}
	authorizationStorage := authorization.NewStorage(cfg.Authorization.Authorizer, rbacRules.RulesFor)
	merge(pods)
	svcs, err := service.NewStorage(getter, alloc)
	if err != nil {
		return nil, nil, err
	}
	merge(svcs)
	plainCore, err := plain.Core(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(plainCore)
	volumes, err := storage.Core(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(volumes)
	storageClasses, err := storage.Group(getter)
	if err != nil {
		return nil, nil, err
	}
	priorityClasses, err := scheduling.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	rcs, err := replicationcontroller.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(rcs)
	quotas, err := resourcequota.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(quotas)
	saTokens.Live = &satoken.Objects{ServiceAccount: serviceAccountGetter(core["serviceaccounts"].(rest.Getter)), Pod: podGetter(podStore)}
	bootstrapTokens := authn.BootstrapTokens{Secrets: secretsIn(core["secrets"].(rest.Getter), metav1.NamespaceSystem)}
	if cfg.Authentication.Authenticator, err = authn.New(pool, opts.TokenFile, saTokens, bootstrapTokens); err != nil {
		return nil, nil, err
	}
	authenticationStorage := authentication.NewStorage(cfg.Authentication.Authenticator, saTokens.APIAudiences)
	genericapiserver.AuthorizeClientBearerToken(cfg.LoopbackClientConfig, &cfg.Authentication, &cfg.Authorization)
	core["serviceaccounts/token"] = serviceaccount.NewTokenREST(core["serviceaccounts"].(rest.Getter), core["pods"].(rest.Getter), nodeStore, saTokens)
	coordination, err := plain.Coordination(getter)
	if err != nil {
		return nil, nil, err
	}
	disc, err := plain.Discovery(getter)
	if err != nil {
		return nil, nil, err
	}
	core["pods/proxy"] = pod.NewProxyREST(podStore, proxyTransport)
	core["services/proxy"] = service.NewProxyREST(core["services"].(rest.Getter), disc["endpointslices"].(rest.Lister), podStore, proxyTransport)
	appsStorage, err := apps.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	batchStorage, err := batch.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	autoscalingStorage, err := autoscalingregistry.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	policyStorage, pdbStore, err := policy.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	core["pods/eviction"] = pod.NewEvictionREST(podStore, core["pods/status"].(rest.Updater), pdbStore, policyStorage["poddisruptionbudgets/status"].(rest.Updater))
	csrStorage, err := certificates.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	serviceCIDRs, defaultCIDR, defaultCIDRStatus, err := servicecidr.NewStorage(getter, serviceNet.String())
	if err != nil {
		return nil, nil, err
	}
	networkingStorage, err := networking.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	maps.Copy(networkingStorage, serviceCIDRs)
	runtimeClasses, err := runtimeclass.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	svmStorage, err := storagemigration.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	namespaces, nsStore, err := namespace.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	merge(namespaces)

	admissionStorage, err := admissionregistration.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	apfStorage, err := apfregistry.NewStorage(getter)
	if err != nil {
		return nil, nil, err
	}
	// API Priority and Fairness: k8s.io/apiserver's filter classifies every request by the FlowSchemas
	// and queues it in its priority level (response headers X-Kubernetes-PF-FlowSchema-UID and
	// X-Kubernetes-PF-PriorityLevel-UID); its config controller reads both through the shared informers
	// (started with RBAC's) and runs as the generic server's post-start hook. The limit is the server's
	// in-flight total, as kube-apiserver's.
	cfg.FlowControl = utilflowcontrol.New(rbacInformers, loopback.FlowcontrolV1(), cfg.MaxRequestsInFlight+cfg.MaxMutatingRequestsInFlight)
	dynamicClient, err := dynamic.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("apiserver: loopback client: %w", err)
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(loopback.Discovery()))
	if cfg.AdmissionControl, err = admission.Chain(func(ctx context.Context, name string) (*corev1.Namespace, error) {
		obj, err := nsStore.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Namespace), nil
	}, admission.NodeRestriction{Pods: podGetter(podStore), Nodes: nodeGetter(nodeStore)}, opts.DefaultTolerationSeconds,
		rbacInformers.Storage().V1().StorageClasses().Lister(), priorityAdmission(priorityClasses["priorityclasses"].(*store.REST)),
		rbacInformers.Networking().V1().IngressClasses().Lister(),
		&admission.RuntimeClass{Lister: rbacInformers.Node().V1().RuntimeClasses().Lister(), Client: loopback.NodeV1().RuntimeClasses()},
		admission.Dynamic{
			Loopback: cfg.LoopbackClientConfig, Client: loopback, Dynamic: dynamicClient, Informers: rbacInformers,
			Authorizer: cfg.Authorization.Authorizer, RESTMapper: restMapper, EffectiveVersion: cfg.EffectiveVersion, Stop: cfg.DrainedNotify(),
		}); err != nil {
		return nil, nil, err
	}

	// one aggregated discovery document (/apis as apidiscovery.k8s.io/v2) for both servers, as in
	// kube-apiserver: the apiextensions server adds each CRD's group version to it
	cfg.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
	webhookServices, err := admission.NewServiceResolver(rbacInformers, cfg.LoopbackClientConfig)
	if err != nil {
		return nil, nil, err
	}
	crds, err := crd.New(crd.Options{
		Generic: *cfg, Storage: *storageConfig(etcdStore), Transformers: transformers, Definitions: openapi.GetOpenAPIDefinitions, Scheme: scheme.Scheme,
		Resolver: webhookServices,
	})
	if err != nil {
		return nil, nil, err
	}
	gs, err := cfg.Complete(nil).New("nodekit-apiserver", crds.Delegate())
	if err != nil {
		return nil, nil, fmt.Errorf("apiserver: %w", err)
	}
	if opts.ShutdownTimeout > 0 {
		gs.ShutdownTimeout = opts.ShutdownTimeout
	}
	legacy := genericapiserver.NewDefaultAPIGroupInfo("", scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
	legacy.VersionedResourcesStorageMap[corev1.SchemeGroupVersion.Version] = core
	if err := gs.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &legacy); err != nil {
		return nil, nil, fmt.Errorf("apiserver: install core/v1: %w", err)
	}
	var groups []*genericapiserver.APIGroupInfo
	for group, storage := range map[string]map[string]rest.Storage{
		appsv1.GroupName: appsStorage, coordinationv1.GroupName: coordination, discoveryv1.GroupName: disc,
		certificatesv1.GroupName: csrStorage, networkingv1.GroupName: networkingStorage, batchv1.GroupName: batchStorage,
		policyv1.GroupName: policyStorage, admissionregistrationv1.GroupName: admissionStorage,
		storagev1.GroupName: storageClasses, nodev1.GroupName: runtimeClasses, svmv1.GroupName: svmStorage,
		schedulingv1.GroupName: priorityClasses, flowcontrolv1.GroupName: apfStorage,
		eventsv1.GroupName: events.NewStorage(core["events"].(*store.REST)),
		rbacv1.GroupName:   rbacStorage, authorizationv1.GroupName: authorizationStorage, authenticationv1.GroupName: authenticationStorage,
	} {
		g := genericapiserver.NewDefaultAPIGroupInfo(group, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		g.VersionedResourcesStorageMap["v1"] = storage
		groups = append(groups, &g)
	}
	{
		// autoscaling: HorizontalPodAutoscalers in v2 (preferred, stored) and v1 (converted, package
		// conversion), as kube-apiserver; v1 is also the Scale kind of the /scale subresources
		g := genericapiserver.NewDefaultAPIGroupInfo(autoscalingv2.GroupName, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		g.PrioritizedVersions = []schema.GroupVersion{autoscalingv2.SchemeGroupVersion, autoscalingv1.SchemeGroupVersion}
		g.VersionedResourcesStorageMap[autoscalingv2.SchemeGroupVersion.Version] = autoscalingStorage
		g.VersionedResourcesStorageMap[autoscalingv1.SchemeGroupVersion.Version] = autoscalingStorage
		groups = append(groups, &g)
	}
	var scraper *metrics.Scraper
	if !opts.DisableMetrics {
		// metrics.k8s.io served by the API server itself, from the kubelets' /stats/summary (docs/metrics.md)
		scraper = metrics.NewScraper(nodeStore, kubelets, opts.MetricResolution, slog.Default().With("component", "metrics"))
		g := genericapiserver.NewDefaultAPIGroupInfo(metricsv1beta1.GroupName, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		g.VersionedResourcesStorageMap[metricsv1beta1.SchemeGroupVersion.Version] = metrics.Storage(scraper, nodeStore, podStore)
		groups = append(groups, &g)
	}
	if err := gs.InstallAPIGroups(groups...); err != nil {
		return nil, nil, fmt.Errorf("apiserver: install groups: %w", err)
	}
	var builtin []string
	for _, g := range groups {
		builtin = append(builtin, g.PrioritizedVersions[0].Group)
	}
	if err := crds.PublishDiscovery(gs.DiscoveryGroupManager, builtin); err != nil {
		return nil, nil, err
	}
	b := &bootstrap{core: core, slices: disc["endpointslices"], kubernetesIP: kubernetesIP.String(), advertise: opts.AdvertiseAddress, port: port, caPEM: certs.ca.CertPEM}
	gs.AddPostStartHookOrDie("nodekit-bootstrap", b.run)
	discovery, err := saTokens.DiscoveryHandlers("https://" + cfg.ExternalAddress + satoken.JWKSPath)
	if err != nil {
		return nil, nil, err
	}
	for path, h := range discovery {
		gs.Handler.NonGoRestfulMux.Handle(path, h)
	}
	if scraper != nil {
		gs.AddPostStartHookOrDie("nodekit-metrics-scraper", func(hc genericapiserver.PostStartHookContext) error {
			go scraper.Run(hc.Context)
			return nil
		})
	}
	gs.AddPostStartHookOrDie("nodekit-node-authorizer-graph", func(hc genericapiserver.PostStartHookContext) error {
		return nodeauthz.Populate(hc.Context, loopback, nodeGraph)
	})
	gs.AddPostStartHookOrDie("nodekit-admission-restmapper", func(hc genericapiserver.PostStartHookContext) error {
		// new API resources (a policy's matchConstraints or paramKind) are found within 10 s, as in kube-apiserver
		go wait.Until(restMapper.Reset, 10*time.Second, hc.Context.Done())
		return nil
	})
	gs.AddPostStartHookOrDie("rbac/bootstrap-roles", func(hc genericapiserver.PostStartHookContext) error {
		return startRBAC(hc.Context, rbacInformers, loopback)
	})
	gs.AddPostStartHookOrDie("priority-and-fairness-config-producer", func(hc genericapiserver.PostStartHookContext) error {
		return ensureAPF(hc.Context, loopback)
	})
	gs.AddPostStartHookOrDie("scheduling/bootstrap-system-priority-classes", func(hc genericapiserver.PostStartHookContext) error {
		return wait.PollUntilContextTimeout(hc.Context, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := scheduling.EnsureSystemClasses(ctx, loopback); err != nil {
				slog.Warn("apiserver system priority classes: retrying", "err", err)
				return false, nil
			}
			return true, nil
		})
	})
	gs.AddPostStartHookOrDie("nodekit-default-servicecidr", func(hc genericapiserver.PostStartHookContext) error {
		return wait.PollUntilContextTimeout(hc.Context, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := servicecidr.EnsureDefault(ctx, defaultCIDR, defaultCIDRStatus); err != nil {
				slog.Warn("apiserver default ServiceCIDR: retrying", "err", err)
				return false, nil
			}
			return true, nil
		})
	})
	gs.AddPostStartHookOrDie("nodekit-service-allocation-repair", func(hc genericapiserver.PostStartHookContext) error {
		go alloc.RunRepair(hc.Context, core["services"].(rest.Lister), time.Minute)
		go func() {
			<-hc.Context.Done()
			cli.Close()
		}()
		return nil
	})
	return gs, crds, nil
}

// podGetter reads a pod from the pod storage (etcd: admission must see the latest binding).
func podGetter(pods *store.REST) admission.PodGetter {
	return func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		obj, err := pods.Get(genericapirequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Pod), nil
	}
}

// priorityAdmission is the Priority admission plugin over the PriorityClass storage (etcd: a class
// created just before its pods is seen).
func priorityAdmission(classes *store.REST) *admission.Priority {
	return &admission.Priority{
		Get: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
			obj, err := classes.Get(ctx, name, &metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return obj.(*schedulingv1.PriorityClass), nil
		},
		List: func(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
			obj, err := classes.List(ctx, &metainternalversion.ListOptions{})
			if err != nil {
				return nil, err
			}
			return obj.(*schedulingv1.PriorityClassList).Items, nil
		},
	}
}

// serviceAccountGetter reads a service account from its storage.
func serviceAccountGetter(sas rest.Getter) func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
		obj, err := sas.Get(genericapirequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.ServiceAccount), nil
	}
}

// nodeGetter reads a Node from the node storage.
func nodeGetter(nodes *store.REST) admission.NodeGetter {
	return func(ctx context.Context, name string) (*corev1.Node, error) {
		obj, err := nodes.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Node), nil
	}
}

// secretsIn reads secrets of one namespace from the secret storage's watch cache (resourceVersion "0"),
// for the bootstrap token authenticator: no loopback client, so authentication never waits on the API
// server's own handler chain.
func secretsIn(secrets rest.Getter, namespace string) authn.SecretGetter {
	return func(ctx context.Context, name string) (*corev1.Secret, error) {
		obj, err := secrets.Get(genericapirequest.WithNamespace(ctx, namespace), name, &metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Secret), nil
	}
}

// startRBAC starts the RBAC informers and reconciles the bootstrap policy through the loopback client
// (retrying every half second until it succeeds), then waits for the informers to sync: the API server
// reports ready only after that, so RBAC decisions never come from an empty cache.
func startRBAC(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface) error {
	factory.Start(ctx.Done())
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := bootstrappolicy.Reconcile(client); err != nil {
			msg := err.Error()
			if i := strings.IndexByte(msg, '\n'); i > 0 {
				msg = msg[:i] + " (and more)"
			}
			slog.Warn("apiserver rbac bootstrap policy: retrying", "err", msg)
			return false, nil
		}
		return true, nil
	})
	// a failed post-start hook ends the process: shutting down before the policy is in place is not one
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("rbac bootstrap policy: %w", err)
	}
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("rbac informer %v did not sync", typ)
		}
	}
	return nil
}

// ensureAPF keeps the bootstrap API Priority and Fairness configuration (apfregistry.Ensure) through the
// loopback client: retried every half second until it first succeeds, then rerun every minute for the
// life of the server, as kube-apiserver's priority-and-fairness-config-producer.
func ensureAPF(ctx context.Context, client kubernetes.Interface) error {
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := apfregistry.Ensure(ctx, client.FlowcontrolV1()); err != nil {
			slog.Warn("apiserver apf bootstrap configuration: retrying", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("apf bootstrap configuration: %w", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := apfregistry.Ensure(ctx, client.FlowcontrolV1()); err != nil && ctx.Err() == nil {
			slog.Warn("apiserver apf bootstrap configuration", "err", err)
		}
	}, time.Minute)
	return nil
}
