package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/controlplane/addons"
	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/controlplane/scheduler"
)

// Run runs the server until ctx ends: etcd (the embedded member in Paths().EtcdDir, unless
// Etcd.Servers names external ones), then the API server (PKI and admin kubeconfig on first start),
// then the scheduler and the controller manager as ordinary API clients. It calls c.Ready once the
// API server answers /readyz (which checks the scheduler and the controller manager as
// /readyz/scheduler and /readyz/controller-manager), then reconciles the add-ons (c.Addons, retrying
// until done), and returns when the API server has shut down. If the scheduler or the controller manager
// stops (returns or panics) while the server runs, Run logs it, shuts the API server down and returns an
// error naming it, so `nodekit server` exits non-zero and its supervisor (systemd, `nodekit up`)
// restarts the whole server.
func Run(ctx context.Context, c Config) error {
	if c.DataDir == "" {
		return errors.New("server: DataDir is required")
	}
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.WithDefaults()
	p := c.Paths()
	ec := c.Etcd
	ec.DataDir = p.EtcdDir
	store, err := etcd.Start(ctx, ec)
	if err != nil {
		return err
	}
	defer store.Close()
	ao := c.APIServer
	ao.PKIDir, ao.AdminKubeconfig = p.PKIDir, p.AdminKubeconfig
	ao.SchedulerKubeconfig, ao.ControllerManagerKubeconfig = p.SchedulerKubeconfig, p.ControllerManagerKubeconfig
	if ao.ShutdownTimeout == 0 {
		ao.ShutdownTimeout = ShutdownTimeout
	}
	ao.EtcdEndpoints = store.Endpoints
	ao.EtcdCAFile, ao.EtcdCertFile, ao.EtcdKeyFile = store.CAFile, store.CertFile, store.KeyFile
	api, err := apiserver.New(ao)
	if err != nil {
		return err
	}
	co := c.Controllers
	// csrsigning signs node client certificates (token joins) with the cluster CA the API server trusts.
	co.ClusterSigner = api.CA
	loops, err := controlLoops(p.SchedulerKubeconfig, p.ControllerManagerKubeconfig, c.Scheduler, co)
	if err != nil {
		return err
	}
	for _, l := range loops {
		if err := api.AddReadyzChecks(l.check()); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, len(loops))
	for _, l := range loops {
		l.start(ctx, stopped)
	}
	addonOpts := c.Addons
	addonOpts.ServiceCIDR = c.APIServer.ServiceCIDR
	go func() {
		if !waitReadyz(ctx, api.KubeconfigPath) {
			return
		}
		if c.Ready != nil {
			c.Ready()
		}
		startAddons(ctx, api.KubeconfigPath, addonOpts)
	}()
	served := make(chan error, 1)
	go func() { served <- api.Run(ctx) }()
	select {
	case err := <-served:
		return err
	case err := <-stopped:
		slog.Error("control loop stopped; shutting the server down so that its supervisor restarts it", "err", err)
		cancel()
		<-served
		return fmt.Errorf("server: %w", err)
	}
}

// ShutdownTimeout bounds how long the API server waits for open requests when the server stops. Pods
// that watch the API (CoreDNS) keep their watches open across the node agent's stop, so the API
// server's own default (60 s) would outlast the 45 s that `nodekit up` grants
// before SIGKILL (TimeoutStopSec=60 in the unit).
const ShutdownTimeout = 15 * time.Second

// startAddons reconciles the cluster add-ons (controlplane/addons) on the admin kubeconfig, retrying
// every 5 s until it succeeds: the k3s packaged-manifests step of every server start.
func startAddons(ctx context.Context, kubeconfig string, o addons.Options) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		slog.Error("add-ons: load kubeconfig", "kubeconfig", kubeconfig, "err", err)
		return
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		slog.Error("add-ons: client", "kubeconfig", kubeconfig, "err", err)
		return
	}
	addons.Run(ctx, client, o, slog.Default().With("component", "addons"), 5*time.Second)
}

// controlLoops returns the scheduler and the controller manager, each with its own kubeconfig
// (identity system:kube-scheduler or system:kube-controller-manager, which the bootstrap RBAC policy
// grants their roles): they reach etcd only through the API server, and their informers retry until it
// serves and authorizes them. The controller manager also gets a metadata client on its identity (the
// namespace controller deletes custom resources with it).
func controlLoops(schedulerKubeconfig, controllersKubeconfig string, so scheduler.Options, co controllers.Options) ([]*loop, error) {
	schedClient, _, err := clientFor(schedulerKubeconfig)
	if err != nil {
		return nil, err
	}
	client, cfg, err := clientFor(controllersKubeconfig)
	if err != nil {
		return nil, err
	}
	if co.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("control loops: metadata client for %s: %w", controllersKubeconfig, err)
	}
	if co.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("control loops: dynamic client for %s: %w", controllersKubeconfig, err)
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("control loops: CRD client for %s: %w", controllersKubeconfig, err)
	}
	co.CRDs = crds.CustomResourceDefinitions()
	return []*loop{
		{name: SchedulerLoop, run: func(ctx context.Context) error { return scheduler.Run(ctx, schedClient, so) }},
		{name: ControllerManagerLoop, run: func(ctx context.Context) error { return controllers.Run(ctx, client, co) }},
	}, nil
}

// clientFor returns a client for a control loop's kubeconfig, and the config it is built on.
func clientFor(kubeconfig string) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("control loops: load %s: %w", kubeconfig, err)
	}
	// client-go's default 5 requests/s would cap the scheduler at about 5 bindings/s.
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("control loops: client for %s: %w", kubeconfig, err)
	}
	return client, cfg, nil
}

// waitReadyz polls GET /readyz on the admin kubeconfig's API server every 250 ms until it answers
// "ok" (true) or ctx ends (false). The kubeconfig is written before the server serves.
func waitReadyz(ctx context.Context, kubeconfig string) bool {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if readyz(ctx, kubeconfig) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func readyz(ctx context.Context, kubeconfig string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}
