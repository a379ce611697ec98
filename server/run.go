package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/controllers/podautoscaler"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/internal/components"
)

// Run runs the server until ctx ends: etcd (the embedded member in Paths().EtcdDir, unless
// Etcd.Servers names external ones), then the API server (PKI and admin kubeconfig on first start),
// then the scheduler and the controller manager as ordinary API clients: with c.Executable, as child
// processes (RunComponent) that it restarts with back-off whenever they exit and stops (SIGTERM, then
// SIGKILL after 10 s) before it returns; without, as goroutines of this process. It records each
// component process in Paths().Components (internal/components) for the co-located kubelet's mirror
// pods. It calls c.Ready once the API server answers /readyz (which checks the scheduler and the
// controller manager as /readyz/scheduler and /readyz/controller-manager: a running loop, or a running
// child process), then reconciles the add-ons (c.Addons, retrying until done), and returns when the
// API server has shut down. If an in-process scheduler or controller manager stops (returns or panics)
// while the server runs, Run logs it, shuts the API server down and returns an error naming it, so
// `nodekit server` exits non-zero and its supervisor (systemd, `nodekit up`) restarts the whole server.
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
	ec.DataDir, ec.PKIDir = p.EtcdDir, p.PKIDir
	store, err := etcd.Start(ctx, ec)
	if err != nil {
		return err
	}
	defer store.Close()
	ao := c.APIServer
	if ao.AuditPolicyFile == p.AuditPolicy {
		if err := ensureDefaultAuditPolicy(p.AuditPolicy); err != nil {
			return err
		}
	}
	ao.PKIDir, ao.AdminKubeconfig = p.PKIDir, p.AdminKubeconfig
	ao.SchedulerKubeconfig, ao.ControllerManagerKubeconfig = p.SchedulerKubeconfig, p.ControllerManagerKubeconfig
	if ao.ShutdownTimeout == 0 {
		ao.ShutdownTimeout = ShutdownTimeout
	}
	ao.DisableMetrics = !c.Addons.Enabled(addons.Metrics)
	ao.EtcdEndpoints = store.Endpoints
	ao.EtcdCAFile, ao.EtcdCertFile, ao.EtcdKeyFile = store.CAFile, store.CertFile, store.KeyFile
	api, err := apiserver.New(ao)
	if err != nil {
		return err
	}
	co := c.Controllers
	// csrsigning signs node client certificates (token joins) with the cluster CA the API server trusts.
	co.ClusterSigner = api.CA
	recordSelf(c, len(ec.Servers) == 0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loops []*loop
	var children []*child
	if c.Executable != "" {
		children = c.children()
		for _, ch := range children {
			if err := api.AddReadyzChecks(ch.check()); err != nil {
				return err
			}
		}
	} else {
		sl, err := schedulerLoop(p.SchedulerKubeconfig, c.Scheduler)
		if err != nil {
			return err
		}
		cl, err := controllerManagerLoop(p.ControllerManagerKubeconfig, co)
		if err != nil {
			return err
		}
		loops = []*loop{sl, cl}
		for _, l := range loops {
			if err := api.AddReadyzChecks(l.check()); err != nil {
				return err
			}
		}
	}
	stopped := make(chan error, len(loops))
	for _, l := range loops {
		l.start(ctx, stopped)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, so run first): the children have exited
	defer cancel()
	for _, ch := range children {
		wg.Go(func() { ch.run(ctx) })
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

// schedulerLoop returns the scheduler on its own kubeconfig (identity system:kube-scheduler, which the
// bootstrap RBAC policy grants its role): it reaches etcd only through the API server, and its informers
// retry until it serves and authorizes it.
func schedulerLoop(kubeconfig string, so scheduler.Options) (*loop, error) {
	client, _, err := clientFor(kubeconfig)
	if err != nil {
		return nil, err
	}
	return &loop{name: SchedulerLoop, run: func(ctx context.Context) error { return scheduler.Run(ctx, client, so) }}, nil
}

// controllerManagerLoop returns the controller manager on its own kubeconfig (identity
// system:kube-controller-manager), with metadata, dynamic and CRD clients on that identity (the
// namespace controller deletes custom resources with the metadata client).
func controllerManagerLoop(kubeconfig string, co controllers.Options) (*loop, error) {
	client, cfg, err := clientFor(kubeconfig)
	if err != nil {
		return nil, err
	}
	if co.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("control loops: metadata client for %s: %w", kubeconfig, err)
	}
	if co.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("control loops: dynamic client for %s: %w", kubeconfig, err)
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("control loops: CRD client for %s: %w", kubeconfig, err)
	}
	co.CRDs = crds.CustomResourceDefinitions()
	if co.PodAutoscalerClients, err = podautoscaler.NewClients(cfg); err != nil {
		return nil, fmt.Errorf("control loops: %w", err)
	}
	return &loop{name: ControllerManagerLoop, run: func(ctx context.Context) error { return controllers.Run(ctx, client, co) }}, nil
}

// children are the scheduler and the controller manager as child processes of c.Executable: the
// server's own command line plus --run-component (RunComponent), logging to Paths().LogFile.
func (c Config) children() []*child {
	p := c.Paths()
	var out []*child
	for _, n := range []struct{ name, loop string }{{components.Scheduler, SchedulerLoop}, {components.ControllerManager, ControllerManagerLoop}} {
		out = append(out, &child{name: n.name, loop: n.loop, exe: c.Executable,
			args:    append(c.Args(), "--"+FlagRunComponent+"="+n.name),
			logFile: p.LogFile(n.name), records: p.Components})
	}
	return out
}

// recordSelf writes the component records of this process: kube-apiserver, and etcd when it is the
// embedded member (an external etcd's record is removed: its pod would not be this process).
func recordSelf(c Config, embeddedEtcd bool) {
	p := c.Paths()
	cmd := append([]string{os.Args[0]}, os.Args[1:]...)
	start := time.Now()
	for _, name := range []string{components.APIServer, components.Etcd} {
		if name == components.Etcd && !embeddedEtcd {
			if err := components.Remove(p.Components, name); err != nil {
				slog.Warn("component record not removed", "component", name, "err", err)
			}
			continue
		}
		if _, err := components.Started(p.Components, name, os.Getpid(), start, cmd, c.LogFile); err != nil {
			slog.Warn("component record not written", "component", name, "err", err)
		}
	}
}

// RunComponent runs one component of server c in this process until ctx ends — the scheduler
// (components.Scheduler) or the controller manager (components.ControllerManager), on their
// kubeconfigs in c's data dir, the controller manager signing with the cluster CA of its PKI dir — as
// the child process `nodekit server ... --run-component=<name>` that Run starts when Executable is set.
// Before it starts the component's informers and leader election it waits for the API server's
// readiness (waitAPIReady, at most componentReadyTimeout, then it starts anyway). It returns ctx's error when ctx ends, and an error naming the component when it stops on its own
// (the process then exits non-zero and the server restarts it).
func RunComponent(ctx context.Context, c Config, name string) error {
	if c.DataDir == "" {
		return errors.New("server: DataDir is required")
	}
	c = c.WithDefaults()
	p := c.Paths()
	var l *loop
	var err error
	kubeconfig := p.SchedulerKubeconfig
	switch name {
	case components.Scheduler:
		l, err = schedulerLoop(kubeconfig, c.Scheduler)
	case components.ControllerManager:
		co := c.Controllers
		ca, caErr := pki.LoadOrCreateCA(p.PKIDir)
		if caErr != nil {
			return fmt.Errorf("--%s=%s: %w", FlagRunComponent, name, caErr)
		}
		co.ClusterSigner = ca
		kubeconfig = p.ControllerManagerKubeconfig
		l, err = controllerManagerLoop(kubeconfig, co)
	default:
		return fmt.Errorf("--%s: %q is not one of %s, %s", FlagRunComponent, name, components.Scheduler, components.ControllerManager)
	}
	if err != nil {
		return err
	}
	if !waitAPIReady(ctx, kubeconfig, slog.Default().With("component", name), componentReadyTimeout) && ctx.Err() != nil {
		return ctx.Err()
	}
	stopped := make(chan error, 1)
	l.start(ctx, stopped)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-stopped:
		return err
	}
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

// componentReadyTimeout bounds how long a component child waits for the API server's readiness before
// it starts anyway (its informers and leader election retry on their own).
const componentReadyTimeout = 2 * time.Minute

// waitAPIReady waits, up to timeout, until the API server of kubeconfig (on the component's own
// identity) answers /readyz without the components' own checks (/readyz/scheduler and
// /readyz/controller-manager, which wait for these very processes): etcd, the informers and every
// post-start hook, poststarthook/rbac/bootstrap-roles among them. A component that starts its informers
// and leader election before the bootstrap roles are reconciled gets "forbidden" answers until they are
// (upstream's kube-controller-manager waits for /healthz the same way). It logs one line when it starts
// waiting and one when it stops, and reports whether the API server became ready.
func waitAPIReady(ctx context.Context, kubeconfig string, log *slog.Logger, timeout time.Duration) bool {
	start := time.Now()
	log.Info("waiting for the API server to be ready before starting", "readyz", "/readyz?exclude="+SchedulerLoop+"&exclude="+ControllerManagerLoop, "timeout", timeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if waitReadyz(wctx, kubeconfig, SchedulerLoop, ControllerManagerLoop) {
		log.Info("API server ready; starting", "waited", time.Since(start).Round(time.Millisecond))
		return true
	}
	if ctx.Err() == nil {
		log.Warn("API server not ready; starting anyway (requests are retried)", "waited", time.Since(start).Round(time.Millisecond))
	}
	return false
}

// waitReadyz polls GET /readyz (without the checks named in exclude) on the kubeconfig's API server
// every 250 ms until it answers "ok" (true) or ctx ends (false). The kubeconfig is written before the
// server serves.
func waitReadyz(ctx context.Context, kubeconfig string, exclude ...string) bool {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if readyz(ctx, kubeconfig, exclude) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func readyz(ctx context.Context, kubeconfig string, exclude []string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	req := client.Discovery().RESTClient().Get().AbsPath("/readyz")
	for _, e := range exclude {
		req = req.Param("exclude", e)
	}
	body, err := req.DoRaw(ctx)
	return err == nil && string(body) == "ok"
}
