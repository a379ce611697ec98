package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/internal/logging"
	"github.com/nodekit/nodekit/server"
)

func init() {
	var (
		cfg            cluster.Config
		componentLevel string
		noDemo         bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a single-node cluster: server and agent as one supervised process tree, with the demo workload",
		Long: `Starts 'nodekit server' (etcd, API server, scheduler, controller manager), then 'nodekit agent' (kubelet,
service proxy, managed containerd with the bundled images, nodekit-cni) as children of this process,
waits for the node to be Ready, applies the demo workload (examples/demo.yaml) and prints the kubeconfig,
how to use kubectl and 'nodekit crictl', and a status table. Component logs go to <data-dir>/logs.
Ctrl-C (or SIGTERM) stops the children in reverse order; pods keep running and a rerun resumes from the
same etcd data. 'nodekit down [--purge]' removes what it made.

When <data-dir>/images holds no image archives and this runs from a nodekit source tree, the bundled
images are built there first ('nodekit images build').`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			var err error
			if cfg.ComponentLogs, err = componentLogs(componentLevel); err != nil {
				return err
			}
			cfg.DataDir, cfg.Demo, cfg.Out, cfg.CLI = globals.dataDir, !noDemo, cmd.OutOrStdout(), os.Args[0]
			if err := ensureImages(cmd, cfg.ImagesDir, globals.dataDir); err != nil {
				return err
			}
			c, err := cluster.Up(ctx, cfg)
			if err != nil {
				if errors.Is(err, ctx.Err()) {
					return nil
				}
				return err
			}
			slog.Info("running; Ctrl-C stops the cluster")
			c.Run(ctx)
			return nil
		},
	}
	bindUpFlags(cmd.Flags(), &cfg)
	cmd.Flags().StringVar(&componentLevel, "component-log-level", "warn", "least level of component log lines echoed to stderr (all go to <data-dir>/logs)")
	cmd.Flags().BoolVar(&noDemo, "no-demo", false, "do not apply the demo workload")
	root.AddCommand(cmd)
}

// bindUpFlags binds `nodekit up`'s cluster settings to cfg.
func bindUpFlags(f *pflag.FlagSet, cfg *cluster.Config) {
	f.StringVar(&cfg.NodeName, "node-name", "", "Node name (default: the hostname, lowercased)")
	f.StringVar(&cfg.NodeIP, "node-ip", "", "node InternalIP (default: the address of the default-route interface)")
	f.StringVar(&cfg.APIBindAddress, "bind-address", server.DefaultBindAddress, "address the API server serves HTTPS on")
	f.IntVar(&cfg.APIPort, "secure-port", server.DefaultSecurePort, "API server HTTPS port")
	f.StringVar(&cfg.EtcdClientAddr, "etcd-listen-client", server.DefaultEtcdClientAddr, "embedded etcd client address")
	f.StringVar(&cfg.ServiceCIDR, "service-cluster-ip-range", server.DefaultServiceCIDR, "ClusterIP range")
	f.StringVar(&cfg.ClusterCIDR, "cluster-cidr", server.DefaultClusterCIDR, "pod network; the node's podCIDR is cut from it")
	f.StringVar(&cfg.KubeletAddress, "kubelet-address", "0.0.0.0", "address of the kubelet server")
	f.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "port of the kubelet server")
	f.StringVar(&cfg.ProxyMetricsAddr, "proxy-metrics-bind-address", "127.0.0.1:10249", "proxy /metrics address")
	f.StringVar(&cfg.ProxyHealthzAddr, "proxy-healthz-bind-address", "0.0.0.0:10256", "proxy /healthz and /livez address")
	f.StringVar(&cfg.ImagesDir, "images-dir", "", "bundled image archives imported at start (default <data-dir>/images)")
	f.StringVar(&cfg.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "where the agent writes the CNI conflist")
	f.StringVar(&cfg.PodLogsDir, "pod-logs-dir", "/var/log/pods", "the kubelet's pod log directory")
	f.StringVar(&cfg.Containerd, "containerd", "", "containerd binary for the managed runtime (default: containerd from PATH)")
	f.StringSliceVar(&cfg.Disable, "disable", nil, "add-ons the server does not install (and removes if installed): "+strings.Join(addons.Names, ","))
	f.StringVar(&cfg.ResolvConf, "resolv-conf", "", "the kubelet's resolver file for dnsPolicy Default pods, CoreDNS's upstream servers included (default /etc/resolv.conf)")
	f.StringVar(&cfg.KubeletConfig, "kubelet-config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) for the kubelet fields no flag sets, e.g. evictionHard")
	f.DurationVar(&cfg.NodeTimeout, "node-timeout", 3*time.Minute, "how long to wait for the node to be Ready")
	f.DurationVar(&cfg.DemoTimeout, "demo-timeout", 3*time.Minute, "how long to wait for the demo Deployment to be available")
}

// ensureImages builds the bundled images into dir (default dataDir/images, where the agents look) when
// it has no archive and a nodekit source tree is found from the working directory (build.Ensure).
func ensureImages(cmd *cobra.Command, dir, dataDir string) error {
	if dir == "" {
		dir = agent.Config{DataDir: dataDir}.Paths().Images
	}
	return build.Ensure(cmd.Context(), dir, slog.Default())
}

// componentLogs returns the console handler for the supervised components' log records at level
// (--component-log-level: debug, info, warn or error), JSON with --log-json.
func componentLogs(level string) (slog.Handler, error) {
	h, err := logging.NewHandler(os.Stderr, level, globals.logJSON)
	if err != nil {
		return nil, fmt.Errorf("--component-log-level: %w", err)
	}
	return h, nil
}
