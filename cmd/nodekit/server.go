package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/internal/sdnotify"
	"github.com/nodekit/nodekit/server"
)

func init() {
	cfg := server.DefaultConfig("")
	cmd := &cobra.Command{
		Use:   server.CommandName,
		Short: "Run the control plane: embedded etcd, the API server, the scheduler and the controller manager",
		Long: `Runs the control plane in one process: the embedded etcd (or --etcd-servers), the API server (PKI and
the admin kubeconfig under --data-dir on first start), and the scheduler and the controller manager as
clients of the API server. Under a Type=notify systemd unit it sends READY=1 once /readyz answers ok.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ready := make(chan struct{})
			cfg.DataDir, cfg.Ready = globals.dataDir, func() { close(ready) }
			sdnotify.Notify(ctx, server.CommandName, ready)
			return server.Run(ctx, cfg)
		},
	}
	server.BindFlags(cmd.Flags(), &cfg)
	root.AddCommand(cmd)
}
