package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/runtime/containerd"
)

// containerdFlags are the flags of `nodekit containerd`.
type containerdFlags struct {
	cfg         containerd.Config
	printConfig bool
	cleanup     bool
	plainHTTP   []string
}

func init() {
	var f containerdFlags
	cmd := &cobra.Command{
		Use:   "containerd",
		Short: "Run nodekit's managed containerd in the foreground (CRI on <data-dir>/containerd/containerd.sock)",
		Long: `Generates containerd's config for the installed release (config version 2 for 1.x, 3/4 for 2.x),
starts containerd with its own root, state and socket under <data-dir>/containerd, imports the image
archives of --images into the k8s.io namespace, and supervises it (restart with backoff) until SIGINT or
SIGTERM. Containers keep running under their shims when it stops, unless --cleanup is given.
--print-config only prints the generated config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runContainerd(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Binary, "containerd", "containerd", "containerd binary (its directory also provides the shim)")
	fl.StringSliceVar(&f.cfg.CNIBinDirs, "cni-bin-dir", nil, "CNI plugin directories (default /usr/lib/cni and /opt/cni/bin where present)")
	fl.StringVar(&f.cfg.CNIConfDir, "cni-conf-dir", "", "CNI config directory (default <data-dir>/containerd/net.d)")
	fl.StringVar(&f.cfg.CgroupDriver, "cgroup-driver", "", "cgroupfs or systemd (default: detected)")
	fl.StringVar(&f.cfg.ImagesDir, "images", "", "directory of image archives to import at start (default <data-dir>/images)")
	fl.StringVar(&f.cfg.LogLevel, "containerd-log-level", "", "containerd's own log level (default info), for the lines it writes to containerd.log in its directory")
	fl.BoolVar(&f.printConfig, "print-config", false, "print the generated config.toml and exit")
	fl.StringSliceVar(&f.plainHTTP, "plain-http-registry", nil, "loopback registry host:port to pull from over plain HTTP (e.g. the address of 'nodekit registry'); repeatable")
	fl.BoolVar(&f.cleanup, "cleanup", false, "on exit, remove every pod and container through CRI before stopping containerd")
	root.AddCommand(cmd)
}

func runContainerd(cmd *cobra.Command, f *containerdFlags) error {
	paths := agent.Config{DataDir: globals.dataDir}.Paths() // the agent's managed containerd and images
	f.cfg.Dir = paths.Containerd
	if f.cfg.ImagesDir == "" {
		f.cfg.ImagesDir = paths.Images
	}
	f.cfg.Logger = slog.Default()
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sup, err := containerd.New(ctx, f.cfg)
	if err != nil {
		return err
	}
	if f.printConfig {
		data, err := containerd.RenderConfig(sup.Params())
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(data)
		return err
	}
	for _, host := range f.plainHTTP {
		if err := containerd.WriteRegistryHost(sup.RegistryConfigPath(), host); err != nil {
			return fmt.Errorf("--plain-http-registry: %w", err)
		}
	}
	if err := sup.Start(ctx); err != nil {
		sup.Stop(context.Background())
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "containerd %s running: CRI endpoint %s\n", sup.Version(), sup.Endpoint())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if f.cleanup {
		return sup.Cleanup(sctx)
	}
	return sup.Stop(sctx)
}
