package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/internal/sdnotify"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// serverFlags are `nodekit server`'s flags.
var serverFlags struct {
	api         server.Options
	etcdClient  string
	etcd        etcd.Config
	controllers controllers.Options
	scheduler   scheduler.Options
}

func init() {
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: embedded etcd and the API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runServer(ctx)
		},
	}
	f := cmd.Flags()
	o := &serverFlags
	f.StringVar(&o.api.BindAddress, "bind-address", "0.0.0.0", "address the API server serves HTTPS on")
	f.IntVar(&o.api.Port, "secure-port", 6443, "API server HTTPS port")
	f.StringVar(&o.api.AdvertiseAddress, "advertise-address", "", "address written to the admin kubeconfig and the kubernetes endpoints (default: first host address)")
	f.StringSliceVar(&o.api.ExtraSANs, "tls-san", nil, "extra IPs or DNS names for the serving certificate")
	f.StringVar(&o.api.ServiceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "ClusterIP range")
	f.StringVar(&o.api.NodePortRange, "service-node-port-range", "30000-32767", "NodePort range")
	f.StringVar(&o.api.TokenFile, "token-auth-file", "", "static bearer tokens CSV: token,user,uid,\"group1,group2\"")
	f.Int64Var(&o.api.DefaultTolerationSeconds, "default-not-ready-toleration-seconds", 300, "seconds new pods tolerate not-ready/unreachable nodes")
	f.StringVar(&o.etcdClient, "etcd-listen-client", "127.0.0.1:2379", "embedded etcd client address (loopback only)")
	f.StringSliceVar(&o.etcd.Servers, "etcd-servers", nil, "external etcd client URLs (no embedded etcd when set)")
	f.StringVar(&o.etcd.CAFile, "etcd-cafile", "", "external etcd CA file")
	f.StringVar(&o.etcd.CertFile, "etcd-certfile", "", "external etcd client certificate")
	f.StringVar(&o.etcd.KeyFile, "etcd-keyfile", "", "external etcd client key")
	f.StringVar(&o.controllers.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "pod network range nodes' podCIDRs are cut from")
	f.IntVar(&o.controllers.NodeCIDRMaskSize, "node-cidr-mask-size", 24, "prefix length of each node's podCIDR")
	f.DurationVar(&o.controllers.NodeMonitorGracePeriod, "node-monitor-grace-period", 40*time.Second, "a node whose lease is not renewed for this long becomes NotReady (Unknown)")
	f.DurationVar(&o.controllers.NodeMonitorPeriod, "node-monitor-period", 5*time.Second, "how often node health and pod evictions are checked")
	f.DurationVar(&o.controllers.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "longest lifetime of the certificates csrsigning issues")
	f.StringSliceVar(&o.controllers.Controllers, "controllers", nil, "controllers to run (default: all)")
	root.AddCommand(cmd)
}

// runServer starts etcd, then the API server; the scheduler and controllers are started after the API
// server (see startControllers) once they exist.
func runServer(ctx context.Context) error {
	o := serverFlags
	o.etcd.DataDir = filepath.Join(globals.dataDir, "etcd")
	o.etcd.ClientAddr = o.etcdClient
	store, err := etcd.Start(ctx, o.etcd)
	if err != nil {
		return err
	}
	defer store.Close()
	o.api.DataDir = globals.dataDir
	o.api.EtcdEndpoints = store.Endpoints
	o.api.EtcdCAFile, o.api.EtcdCertFile, o.api.EtcdKeyFile = store.CAFile, store.CertFile, store.KeyFile
	api, err := server.New(o.api)
	if err != nil {
		return err
	}
	// csrsigning signs node client certificates (token joins) with the cluster CA the API server trusts.
	o.controllers.ClusterSigner = api.CA
	if err := startControllers(ctx, api.KubeconfigPath, o.controllers); err != nil {
		return err
	}
	sdnotify.Notify(ctx, "server", apiServing(ctx, api.KubeconfigPath))
	return api.Run(ctx)
}

// startControllers starts the scheduler and the controller manager as ordinary API clients on the admin
// kubeconfig: they reach etcd only through the API server, and their informers retry until it serves.
// A control loop that exits with an error is logged; the API server keeps serving.
func startControllers(ctx context.Context, kubeconfig string, opts controllers.Options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("control loops: load %s: %w", kubeconfig, err)
	}
	// client-go's default 5 requests/s would cap the scheduler at about 5 bindings/s.
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("control loops: client for %s: %w", kubeconfig, err)
	}
	go func() {
		if err := scheduler.Run(ctx, client, serverFlags.scheduler); err != nil && ctx.Err() == nil {
			slog.Error("scheduler stopped", "err", err)
		}
	}()
	go func() {
		if err := controllers.Run(ctx, client, opts); err != nil && ctx.Err() == nil {
			slog.Error("controller manager stopped", "err", err)
		}
	}()
	return nil
}
