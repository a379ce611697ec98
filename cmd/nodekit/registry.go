package main

import (
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/images/registry"
)

func init() {
	var addr, dir string
	cmd := &cobra.Command{
		Use:   "registry [--addr 127.0.0.1:5000] [--images DIR]",
		Short: "Serve the bundled images from an OCI registry on loopback (plain HTTP)",
		Long: `Serves an OCI distribution registry on a loopback address, seeded with every image archive in
--images (default <data-dir>/images). "nodekit.local/demo-server:v1" is served as "<addr>/demo-server:v1".
containerd pulls from it over plain HTTP once <registry config_path>/<addr>/hosts.toml says so; nodekit's
managed containerd writes that file with runtime/containerd.WriteRegistryHost. Runs until SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = agent.Config{DataDir: globals.dataDir}.Paths().Images
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			srv, err := registry.Start(ctx, addr, dir, slog.Default())
			if err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "registry listening on http://%s (%d images)\n", srv.Addr, len(srv.Images))
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:5000", "loopback host:port to listen on (port 0 picks one)")
	cmd.Flags().StringVar(&dir, "images", "", "directory of OCI image archives (default <data-dir>/images)")
	root.AddCommand(cmd)
}
