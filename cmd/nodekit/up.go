package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/internal/logging"
)

func init() {
	var (
		cfg            cluster.Config
		componentLevel string
		noDemo         bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a single-node cluster: server, agent and proxy as one supervised process tree, with the demo workload",
		Long: `Starts 'nodekit server' (etcd, API server, scheduler, controllers), then 'nodekit agent' (kubelet,
managed containerd with the bundled images, nodekit-cni) and 'nodekit proxy' as children of this process,
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
			cfg.DataDir = globals.dataDir
			cfg.Demo = !noDemo
			cfg.Out = cmd.OutOrStdout()
			cfg.CLI = os.Args[0]
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
	f := cmd.Flags()
	f.StringVar(&cfg.NodeName, "node-name", "", "Node name (default: the hostname, lowercased)")
	f.StringVar(&cfg.NodeIP, "node-ip", "", "node InternalIP (default: the address of the default-route interface)")
	f.StringVar(&cfg.APIBindAddress, "bind-address", "0.0.0.0", "address the API server serves HTTPS on")
	f.IntVar(&cfg.APIPort, "secure-port", 6443, "API server HTTPS port")
	f.StringVar(&cfg.EtcdClientAddr, "etcd-listen-client", "127.0.0.1:2379", "embedded etcd client address")
	f.StringVar(&cfg.ServiceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "ClusterIP range")
	f.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "pod network; the node's podCIDR is cut from it")
	f.StringVar(&cfg.KubeletAddress, "kubelet-address", "0.0.0.0", "address of the kubelet server")
	f.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "port of the kubelet server")
	f.StringVar(&cfg.ProxyMetricsAddr, "proxy-metrics-bind-address", "127.0.0.1:10249", "proxy /healthz and /metrics address")
	f.StringVar(&cfg.ImagesDir, "images-dir", "", "bundled image archives imported at start (default <data-dir>/images)")
	f.StringVar(&cfg.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "where the agent writes the CNI conflist")
	f.StringVar(&cfg.PodLogsDir, "pod-logs-dir", "/var/log/pods", "the kubelet's pod log directory")
	f.StringVar(&cfg.Containerd, "containerd", "", "containerd binary for the managed runtime (default: containerd from PATH)")
	f.DurationVar(&cfg.NodeTimeout, "node-timeout", 3*time.Minute, "how long to wait for the node to be Ready")
	f.DurationVar(&cfg.DemoTimeout, "demo-timeout", 3*time.Minute, "how long to wait for the demo Deployment to be available")
	f.StringVar(&componentLevel, "component-log-level", "warn", "least level of component log lines echoed to stderr (all go to <data-dir>/logs)")
	f.BoolVar(&noDemo, "no-demo", false, "do not apply the demo workload")
	root.AddCommand(cmd)
}

// ensureImages builds the bundled images into dir (default dataDir/images, where the agents look) when it
// has no archive and a nodekit source tree is found from the working directory; otherwise the agents
// import what is there.
func ensureImages(cmd *cobra.Command, dir, dataDir string) error {
	if dir == "" {
		dir = filepath.Join(dataDir, "images")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tar")); len(m) > 0 {
		return nil
	}
	src, err := build.FindModuleDir(".")
	if err != nil {
		slog.Warn("no image archives and no nodekit source tree to build them from: pods need their images in containerd", "images_dir", dir)
		return nil
	}
	slog.Info("building the bundled images", "source", src, "out", dir)
	// build.Build logs one line per image built.
	if _, err := build.Build(cmd.Context(), build.Options{ModuleDir: src, OutDir: dir}); err != nil {
		return fmt.Errorf("building the bundled images into %s: %w", dir, err)
	}
	return nil
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
