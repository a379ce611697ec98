// Package controllers runs nodekit's bundled controller manager: the node IPAM, node lifecycle,
// ReplicaSet, ReplicationController, Deployment, DaemonSet, StatefulSet, Job, CronJob, disruption (PodDisruptionBudget), EndpointSlice (+ Endpoints), EndpointSlice mirroring, namespace, garbage collector, ServiceAccount,
// CSR approving and signing, PersistentVolume binder (with the local-path provisioner), bootstrap token cleaner, bootstrap signer, root CA publisher, ClusterRole aggregation, resource quota and horizontal pod autoscaler controllers, each a small
// package of its own on one shared client-go informer factory (or its own narrow informers), talking
// to the API server only (kube-controller-manager's shape, much smaller).
package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/nodekit/nodekit/controlplane/controllers/bootstraptoken"
	"github.com/nodekit/nodekit/controlplane/controllers/certificates"
	"github.com/nodekit/nodekit/controlplane/controllers/clusterroleaggregation"
	"github.com/nodekit/nodekit/controlplane/controllers/cronjob"
	"github.com/nodekit/nodekit/controlplane/controllers/daemonset"
	"github.com/nodekit/nodekit/controlplane/controllers/deployment"
	"github.com/nodekit/nodekit/controlplane/controllers/disruption"
	"github.com/nodekit/nodekit/controlplane/controllers/endpointslice"
	"github.com/nodekit/nodekit/controlplane/controllers/endpointslicemirroring"
	"github.com/nodekit/nodekit/controlplane/controllers/garbagecollector"
	"github.com/nodekit/nodekit/controlplane/controllers/job"
	"github.com/nodekit/nodekit/controlplane/controllers/namespace"
	"github.com/nodekit/nodekit/controlplane/controllers/nodeipam"
	"github.com/nodekit/nodekit/controlplane/controllers/nodelifecycle"
	"github.com/nodekit/nodekit/controlplane/controllers/podautoscaler"
	"github.com/nodekit/nodekit/controlplane/controllers/replicaset"
	"github.com/nodekit/nodekit/controlplane/controllers/resourcequota"
	"github.com/nodekit/nodekit/controlplane/controllers/rootcacertpublisher"
	"github.com/nodekit/nodekit/controlplane/controllers/serviceaccount"
	"github.com/nodekit/nodekit/controlplane/controllers/statefulset"
	"github.com/nodekit/nodekit/controlplane/controllers/storagemigration"
	"github.com/nodekit/nodekit/controlplane/controllers/volume"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/internal/podnet"
)

// Names of the controllers, for Options.Controllers.
const (
	NodeIPAM      = "nodeipam"
	NodeLifecycle = "nodelifecycle"
	ReplicaSet    = "replicaset"
	// ReplicationController is upstream's replication manager (core/v1 ReplicationControllers).
	ReplicationController = "replicationcontroller"
	Deployment            = "deployment"
	EndpointSlice         = "endpointslice"
	// EndpointSliceMirroring mirrors the Endpoints of Services without a selector into EndpointSlices.
	EndpointSliceMirroring = "endpointslicemirroring"
	Namespace              = "namespace"
	GarbageCollector       = "garbagecollector"
	ServiceAccount         = "serviceaccount"
	CSRApproving           = "csrapproving"
	CSRSigning             = "csrsigning"
	TokenCleaner           = "tokencleaner"
	BootstrapSigner        = "bootstrapsigner"
	RootCAPublisher        = "root-ca-cert-publisher"
	DaemonSet              = "daemonset"
	StatefulSet            = "statefulset"
	Job                    = "job"
	CronJob                = "cronjob"
	Disruption             = "disruption"
	// ClusterRoleAggregation fills aggregated ClusterRoles' rules.
	ClusterRoleAggregation = "clusterrole-aggregation"
	// ResourceQuota computes ResourceQuotas' status.hard and status.used.
	ResourceQuota = "resourcequota"
	// PersistentVolumeBinder binds claims to volumes, provisions local-path volumes and reclaims them.
	PersistentVolumeBinder = "persistentvolume-binder"
	// StorageVersionMigrator rewrites the objects StorageVersionMigrations name (needs Options.Dynamic).
	StorageVersionMigrator = "storage-version-migrator"
	// HorizontalPodAutoscaler scales HorizontalPodAutoscalers' targets (needs Options.PodAutoscalerClients).
	HorizontalPodAutoscaler = "horizontal-pod-autoscaler"
)

// All lists every controller name.
var All = []string{NodeIPAM, NodeLifecycle, ReplicaSet, ReplicationController, Deployment, EndpointSlice, EndpointSliceMirroring, Namespace, GarbageCollector, ServiceAccount,
	CSRApproving, CSRSigning, TokenCleaner, BootstrapSigner, RootCAPublisher, DaemonSet, StatefulSet, Job, CronJob, Disruption, ClusterRoleAggregation, ResourceQuota, PersistentVolumeBinder, StorageVersionMigrator, HorizontalPodAutoscaler}

// DefaultNodeCIDRMaskSize is the prefix length of each Node's podCIDR when Options.NodeCIDRMaskSize is 0.
const DefaultNodeCIDRMaskSize = 24

// Options configure the controller manager; zero values take the defaults given per field.
type Options struct {
	// Controllers to run, by name (default: All).
	Controllers []string
	// ClusterCIDR is the range podCIDRs are cut from (default podnet.DefaultClusterCIDR, 10.244.0.0/16).
	ClusterCIDR string
	// NodeCIDRMaskSize is the prefix length of each Node's podCIDR (default 24).
	NodeCIDRMaskSize int
	// NodeMonitorGracePeriod: a Node silent this long becomes Unknown (default 40 s).
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod: how often node health and evictions are checked (default 5 s).
	NodeMonitorPeriod time.Duration
	// Workers per queue-driven controller (default 2).
	Workers int
	// ResyncPeriod of the shared informers (default 0: no periodic resync).
	ResyncPeriod time.Duration
	// ClusterSigner is the cluster CA that csrsigning signs node certificates with (kube-controller-
	// manager's --cluster-signing-cert-file/--cluster-signing-key-file). When nil, csrsigning is not
	// started and says so in the log.
	ClusterSigner certificates.Authority
	// RootCA is the PEM CA bundle that verifies the API server, published as the kube-root-ca.crt
	// ConfigMap of every namespace (kube-controller-manager's --root-ca-file). When empty it is the
	// ClusterSigner's certificate if the signer has one (a CertificatePEM method, as pki.CA); when
	// neither is set, root-ca-cert-publisher is not started and says so in the log.
	RootCA []byte
	// ClusterSigningDuration is the longest lifetime csrsigning issues (default one year).
	ClusterSigningDuration time.Duration
	// Metadata is a metadata client on the same identity as the clientset: the namespace controller
	// deletes with it, and the garbage collector watches and collects with it, the resources discovery
	// lists beyond the built-in kinds (custom resources). When nil, those are left alone and both
	// controllers say so in the log.
	Metadata metadata.Interface
	// Dynamic is a dynamic client on the same identity: the storage version migrator patches objects of
	// any resource through it.
	Dynamic dynamic.Interface
	// CRDs is a CustomResourceDefinition client on the same identity: the storage version migrator marks
	// a custom resource's definition while its objects migrate, and trims its storedVersions after.
	CRDs apiextensionsclient.CustomResourceDefinitionInterface
	// PodAutoscalerClients are the horizontal-pod-autoscaler's scale, RESTMapper and metrics clients
	// on the same identity (podautoscaler.NewClients); when unset the controller is not started and
	// says so in the log.
	PodAutoscalerClients podautoscaler.Clients
	// PodAutoscaler tunes the horizontal-pod-autoscaler (sync period, tolerance, windows).
	PodAutoscaler podautoscaler.Options
	// ResourceQuotaSyncPeriod is how often the resource quota controller recalculates every quota in
	// full (kube-controller-manager's --resource-quota-sync-period; default 5 min).
	ResourceQuotaSyncPeriod time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if len(o.Controllers) == 0 {
		o.Controllers = All
	}
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = podnet.DefaultClusterCIDR
	}
	if o.NodeCIDRMaskSize == 0 {
		o.NodeCIDRMaskSize = DefaultNodeCIDRMaskSize
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if len(o.RootCA) == 0 {
		if ca, ok := o.ClusterSigner.(interface{ CertificatePEM() []byte }); ok {
			o.RootCA = ca.CertificatePEM()
		}
	}
}

type runner interface {
	Run(ctx context.Context, workers int)
}

type runFunc func(ctx context.Context, workers int)

func (f runFunc) Run(ctx context.Context, workers int) { f(ctx, workers) }

// Run starts the selected controllers on client and blocks until ctx is done and every controller has
// stopped. It returns an error at once for an unknown controller name or bad options (e.g. a cluster
// CIDR that does not parse).
func Run(ctx context.Context, client kubernetes.Interface, opts Options) error {
	if client == nil {
		return fmt.Errorf("controllers: client is nil")
	}
	opts.setDefaults()
	for _, name := range opts.Controllers {
		if !slices.Contains(All, name) {
			return fmt.Errorf("controllers: unknown controller %q (known: %v)", name, All)
		}
	}
	log := opts.Logger.With("component", "controller-manager")
	factory := informers.NewSharedInformerFactory(client, opts.ResyncPeriod)
	var runners []runner
	var started []string
	for _, name := range opts.Controllers {
		var r runner
		var err error
		switch name {
		case NodeIPAM:
			r, err = nodeipam.New(client, factory, opts.ClusterCIDR, opts.NodeCIDRMaskSize, log)
		case NodeLifecycle:
			var c *nodelifecycle.Controller
			c, err = nodelifecycle.New(client, factory, nodelifecycle.Options{
				GracePeriod: opts.NodeMonitorGracePeriod, MonitorPeriod: opts.NodeMonitorPeriod}, log)
			if c != nil {
				r = runFunc(func(ctx context.Context, _ int) { c.Run(ctx) })
			}
		case ReplicaSet:
			r, err = replicaset.New(client, factory, log)
		case ReplicationController:
			r, err = replicaset.NewReplicationControllers(client, factory, log)
		case Deployment:
			r, err = deployment.New(client, factory, log)
		case EndpointSlice:
			r, err = endpointslice.New(client, factory, log)
		case EndpointSliceMirroring:
			r, err = endpointslicemirroring.New(client, factory, log)
		case Namespace:
			r, err = namespace.New(client, opts.Metadata, factory, log)
		case GarbageCollector:
			r, err = garbagecollector.New(client, opts.Metadata, factory, log)
		case ServiceAccount:
			r, err = serviceaccount.New(client, factory, log)
		case CSRApproving:
			r, err = certificates.NewApprover(client, factory, log)
		case CSRSigning:
			if opts.ClusterSigner == nil {
				log.Warn("controller not started: no cluster signing CA configured", "controller", CSRSigning)
				continue
			}
			r, err = certificates.NewSigner(client, factory, opts.ClusterSigner, opts.ClusterSigningDuration, log)
		case RootCAPublisher:
			if len(opts.RootCA) == 0 {
				log.Warn("controller not started: no root CA configured", "controller", RootCAPublisher)
				continue
			}
			r, err = rootcacertpublisher.New(client, factory, opts.RootCA, opts.ResyncPeriod, log)
		case TokenCleaner:
			r, err = bootstraptoken.NewCleaner(client, opts.ResyncPeriod, log)
		case BootstrapSigner:
			r, err = bootstraptoken.NewSigner(client, opts.ResyncPeriod, log)
		case DaemonSet:
			r, err = daemonset.New(client, factory, log)
		case StatefulSet:
			r, err = statefulset.New(client, factory, log)
		case Job:
			r, err = job.New(client, factory, nil, log)
		case CronJob:
			r, err = cronjob.New(client, factory, nil, log)
		case Disruption:
			r, err = disruption.New(client, factory, nil, log)
		case ClusterRoleAggregation:
			r, err = clusterroleaggregation.New(client, factory, log)
		case ResourceQuota:
			r, err = resourcequota.New(client, factory, opts.Metadata, opts.ResourceQuotaSyncPeriod, log)
		case PersistentVolumeBinder:
			r, err = volume.New(client, factory, bundled.DemoServerV1, log)
		case StorageVersionMigrator:
			if opts.Dynamic == nil || opts.Metadata == nil {
				log.Warn("controller not started: no dynamic or metadata client configured", "controller", StorageVersionMigrator)
				continue
			}
			r, err = storagemigration.New(client, opts.CRDs, opts.Dynamic, opts.Metadata, factory, log)
		case HorizontalPodAutoscaler:
			pc := opts.PodAutoscalerClients
			if pc.Scales == nil || pc.Mapper == nil || pc.Metrics == nil {
				log.Warn("controller not started: no scale, RESTMapper or metrics client configured", "controller", HorizontalPodAutoscaler)
				continue
			}
			r, err = podautoscaler.New(client, factory, pc.Scales, pc.Mapper, pc.Metrics, opts.PodAutoscaler, log)
		}
		if err != nil {
			return fmt.Errorf("controllers: %s: %w", name, err)
		}
		runners = append(runners, r)
		started = append(started, name)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("controllers: cache for %v did not sync: %w", typ, ctx.Err())
		}
	}
	log.Info("controllers started", "controllers", started)
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx, opts.Workers) }()
	}
	wg.Wait()
	return nil
}
