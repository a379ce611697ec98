package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/agent"
)

// agentFlags is `nodekit agent`'s command line, bound to an agent.Config.
var agentFlags *agent.Flags

func init() {
	cfg := agent.Default()
	cmd := &cobra.Command{
		Use:   agent.Command,
		Short: "Run the node agent: the kubelet (node registration, heartbeats, pods over CRI, :10250 server) on containerd, and the service proxy",
		Args:  cobra.NoArgs,
	}
	// The agent's --data-dir (the same flag as the global one) is bound to its Config.
	agentFlags = agent.BindFlags(cmd.Flags(), &cfg)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := agentFlags.Config()
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return agent.Run(ctx, c)
	}
	root.AddCommand(cmd)
}
