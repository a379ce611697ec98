package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/internal/logging"
	"github.com/nodekit/nodekit/internal/sdnotify"
	"github.com/nodekit/nodekit/server"
)

func init() {
	cfg := server.DefaultConfig("")
	var component string
	cmd := &cobra.Command{
		Use:   server.CommandName,
		Short: "Run the control plane: embedded etcd, the API server, the scheduler and the controller manager",
		Long: `Runs the control plane: the embedded etcd (or --etcd-servers) and the API server (PKI and the admin
kubeconfig under --data-dir on first start) in this process, and the scheduler and the controller manager
as its child processes (clients of the API server, restarted with back-off when they exit). Logs go to
stderr and to <data-dir>/logs/kube-apiserver.log; the children's to <data-dir>/logs/kube-scheduler.log and
kube-controller-manager.log. Under a Type=notify systemd unit it sends READY=1 once /readyz answers ok.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cfg.DataDir = globals.dataDir
			if component != "" {
				return server.RunComponent(ctx, cfg, component)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Executable = exe
			cfg.LogFile = cfg.Paths().LogFile(components.APIServer)
			fh, f, err := logging.OpenFile(cfg.LogFile, globals.logLevel)
			if err != nil {
				return fmt.Errorf("server log file: %w", err)
			}
			defer f.Close()
			logging.Install(slog.NewMultiHandler(slog.Default().Handler(), fh))
			ready := make(chan struct{})
			cfg.Ready = func() { close(ready) }
			sdnotify.Notify(ctx, server.CommandName, ready)
			return server.Run(ctx, cfg)
		},
	}
	server.BindFlags(cmd.Flags(), &cfg)
	cmd.Flags().StringVar(&component, server.FlagRunComponent, "", "run only this component of the server (kube-scheduler, kube-controller-manager): the server's own child processes")
	_ = cmd.Flags().MarkHidden(server.FlagRunComponent)
	root.AddCommand(cmd)
}
