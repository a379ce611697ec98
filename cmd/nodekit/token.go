package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/controlplane/jointoken"
	"github.com/nodekit/nodekit/server"
)

// tokenKubeconfig is `nodekit token`'s --kubeconfig (kubeadm token's, for nodekit).
var tokenKubeconfig string

func init() {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage node join (bootstrap) tokens: create, list, delete",
	}
	cmd.PersistentFlags().StringVar(&tokenKubeconfig, "kubeconfig", "", "admin kubeconfig (default <data-dir>/admin.kubeconfig)")
	cmd.AddCommand(tokenCreateCmd(), tokenListCmd(), tokenDeleteCmd())
	root.AddCommand(cmd)
}

func tokenCreateCmd() *cobra.Command {
	var o jointoken.Options
	cmd := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token and print it with the agent's join command (server URL and CA hash)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Token = args[0]
			}
			c, err := tokenClient()
			if err != nil {
				return err
			}
			d, err := jointoken.ClusterInfo(cmd.Context(), c)
			if err != nil {
				return err
			}
			tok, err := jointoken.Create(cmd.Context(), c, o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintln(cmd.OutOrStdout(), d.JoinCommand(tok))
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.TTL, "ttl", 24*time.Hour, "how long the token is valid (0: never expires)")
	f.StringVar(&o.Description, "description", "", "human-readable description of the token")
	f.StringSliceVar(&o.Groups, "groups", []string{jointoken.DefaultGroup}, "extra groups the token authenticates as (system:bootstrappers:...)")
	f.StringSliceVar(&o.Usages, "usages", []string{"signing", "authentication"}, "what the token may be used for")
	return cmd
}

func tokenListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List bootstrap tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tokenClient()
			if err != nil {
				return err
			}
			toks, err := jointoken.List(cmd.Context(), c)
			if err != nil {
				return err
			}
			return jointoken.WriteTable(cmd.OutOrStdout(), toks, time.Now())
		},
	}
}

func tokenDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID|TOKEN...",
		Short: "Delete bootstrap tokens (by id or whole token)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tokenClient()
			if err != nil {
				return err
			}
			for _, a := range args {
				id, err := jointoken.Delete(cmd.Context(), c, a)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bootstrap token %q deleted\n", id)
			}
			return nil
		},
	}
}

// tokenClient is an API client on --kubeconfig (default the server's admin kubeconfig in --data-dir).
func tokenClient() (kubernetes.Interface, error) { return adminClient(tokenKubeconfig) }

// adminClient is an API client on the kubeconfig at path (default the server's admin kubeconfig in
// --data-dir).
func adminClient(path string) (kubernetes.Interface, error) {
	if path == "" {
		path = server.Config{DataDir: globals.dataDir}.Paths().AdminKubeconfig
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	return kubernetes.NewForConfig(cfg)
}
