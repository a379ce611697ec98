package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/controlplane/scheduler"
)

// Run runs the server until ctx ends: etcd (the embedded member in Paths().EtcdDir, unless
// Etcd.Servers names external ones), then the API server (PKI and admin kubeconfig on first start),
// then the scheduler and the controller manager as ordinary API clients. It calls c.Ready once the
// API server answers /readyz (which checks the scheduler and the controller manager as
// /readyz/scheduler and /readyz/controller-manager) and returns when the API server has shut down. If
// the scheduler or the controller manager stops (returns or panics) while the server runs, Run logs it,
// shuts the API server down and returns an error naming it, so `nodekit server` exits non-zero and its
// supervisor (systemd, `nodekit up`) restarts the whole server.
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
	if c.Ready != nil {
		go func() {
			if waitReadyz(ctx, api.KubeconfigPath) {
				c.Ready()
			}
		}()
	}
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

// controlLoops returns the scheduler and the controller manager, each with its own kubeconfig
// (identity system:kube-scheduler or system:kube-controller-manager, which the bootstrap RBAC policy
// grants their roles): they reach etcd only through the API server, and their informers retry until it
// serves and authorizes them.
func controlLoops(schedulerKubeconfig, controllersKubeconfig string, so scheduler.Options, co controllers.Options) ([]*loop, error) {
	schedClient, err := clientFor(schedulerKubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := clientFor(controllersKubeconfig)
	if err != nil {
		return nil, err
	}
	return []*loop{
		{name: SchedulerLoop, run: func(ctx context.Context) error { return scheduler.Run(ctx, schedClient, so) }},
		{name: ControllerManagerLoop, run: func(ctx context.Context) error { return controllers.Run(ctx, client, co) }},
	}, nil
}

// clientFor returns a client for a control loop's kubeconfig.
func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("control loops: load %s: %w", kubeconfig, err)
	}
	// client-go's default 5 requests/s would cap the scheduler at about 5 bindings/s.
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("control loops: client for %s: %w", kubeconfig, err)
	}
	return client, nil
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
