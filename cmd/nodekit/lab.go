package main

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/internal/cli"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/server"
)

// labDataDir is --data-dir, or /var/lib/nodekit-lab when it was not given (so a lab never shares the
// single-node cluster's data).
func labDataDir() string {
	if root.PersistentFlags().Changed(cli.FlagDataDir) {
		return globals.dataDir
	}
	return cluster.DefaultLabDataDir
}

func init() {
	lab := &cobra.Command{
		Use:   "lab",
		Short: "Multi-node labs on one host: a server and N agent nodes as network namespaces on a lab bridge",
	}
	lab.AddCommand(labUpCmd(), labDownCmd(), labExecCmd())
	root.AddCommand(lab)
}

func labUpCmd() *cobra.Command {
	var (
		cfg            cluster.LabConfig
		componentLevel string
	)
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a lab: the server, then N nodes (each a network namespace with its own agent, containerd and proxy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			var err error
			if cfg.ComponentLogs, err = componentLogs(componentLevel); err != nil {
				return err
			}
			cfg.DataDir, cfg.Out, cfg.CLI = labDataDir(), cmd.OutOrStdout(), os.Args[0]
			// The nodes import <data-dir>/images by default and nodekit.local images cannot be pulled:
			// without archives there no lab pod could start.
			if err := ensureImages(cmd, cfg.ImagesDir, cfg.DataDir); err != nil {
				return err
			}
			l, err := cluster.LabUp(ctx, cfg)
			if err != nil {
				if errors.Is(err, ctx.Err()) {
					return nil
				}
				return err
			}
			slog.Info("lab running; Ctrl-C stops its processes, 'nodekit lab down' removes it")
			l.Run(ctx)
			return nil
		},
	}
	f := up.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 3, "number of agent nodes")
	f.IntVar(&cfg.JoinNodes, "join-nodes", 0, "number of extra nodes made without an agent, to join like real machines (hack/install.sh agent --token inside 'lab exec'; the summary prints how)")
	f.StringVar(&cfg.Prefix, "prefix", "nklab", "prefix of the lab's bridge, namespaces, interfaces and node names")
	f.StringVar(&cfg.Subnet, "subnet", "172.30.0.0/24", "lab bridge /24: the server is .1, node i is .(10+i)")
	f.IntVar(&cfg.APIPort, "secure-port", server.DefaultSecurePort, "API server HTTPS port (on the lab bridge address)")
	f.StringVar(&cfg.EtcdClientAddr, "etcd-listen-client", server.DefaultEtcdClientAddr, "embedded etcd client address")
	f.StringVar(&cfg.ServiceCIDR, "service-cluster-ip-range", server.DefaultServiceCIDR, "ClusterIP range")
	f.StringVar(&cfg.ClusterCIDR, "cluster-cidr", server.DefaultClusterCIDR, "pod network; each node's podCIDR is cut from it")
	f.StringVar(&cfg.ImagesDir, "images-dir", "", "bundled image archives each node imports (default <data-dir>/images, built there first when empty and run from a nodekit source tree)")
	f.StringVar(&cfg.Containerd, "containerd", "", "containerd binary the agents manage (default: containerd from PATH)")
	f.StringVar(&cfg.NetworkBackend, "network-backend", podroutes.BackendHostGW, "every node's agent --network-backend: "+strings.Join(podroutes.Backends, ", ")+
		" (vxlan: the nodes tunnel to each other over the lab bridge; the host routes to the nodes' pods via their lab addresses with either)")
	f.StringVar(&cfg.KubeletConfig, "kubelet-config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) every node's kubelet reads, for the fields no flag sets, e.g. evictionHard")
	f.StringSliceVar(&cfg.Disable, "disable", nil, "add-ons the server does not install: "+strings.Join(addons.Names, ","))
	f.StringVar(&componentLevel, "component-log-level", "warn", "least level of component log lines echoed to stderr")
	return up
}

func labDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the lab and remove all of it: pods, containerd, namespaces, veths, bridge, rules, data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			return cluster.LabDown(cmd.Context(), labDataDir(), exe, nil)
		},
	}
}

func labExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "exec NODE -- CMD [ARGS...]",
		Short: "Run a command in a lab node's network namespace",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := cluster.LabExec(labDataDir(), args[0], args[1:])
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				os.Exit(ee.ExitCode())
			}
			return err
		},
	}
}
