package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/controlplane/jointoken"
)

// tokenFlags are `nodekit token`'s flags (kubeadm token's, for nodekit).
var tokenFlags struct {
	kubeconfig string
	create     jointoken.Options
}

func init() {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage node join (bootstrap) tokens: create, list, delete",
	}
	cmd.PersistentFlags().StringVar(&tokenFlags.kubeconfig, "kubeconfig", "", "admin kubeconfig (default <data-dir>/admin.kubeconfig)")
	create := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token and print it with the agent's join command (server URL and CA hash)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := tokenFlags.create
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
	f := create.Flags()
	f.DurationVar(&tokenFlags.create.TTL, "ttl", 24*time.Hour, "how long the token is valid (0: never expires)")
	f.StringVar(&tokenFlags.create.Description, "description", "", "human-readable description of the token")
	f.StringSliceVar(&tokenFlags.create.Groups, "groups", []string{jointoken.DefaultGroup}, "extra groups the token authenticates as (system:bootstrappers:...)")
	f.StringSliceVar(&tokenFlags.create.Usages, "usages", []string{"signing", "authentication"}, "what the token may be used for")
	list := &cobra.Command{
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
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			fmt.Fprintln(w, "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
			for _, t := range toks {
				ttl, expires := "<forever>", "<never>"
				if t.Expires != nil {
					expires = t.Expires.UTC().Format(time.RFC3339)
					ttl = "<invalid>"
					if left := time.Until(*t.Expires); left > 0 {
						ttl = duration.ShortHumanDuration(left)
					}
				}
				desc := t.Description
				if desc == "" {
					desc = "<none>"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Token, ttl, expires, strings.Join(t.Usages, ","), desc, strings.Join(t.Groups, ","))
			}
			return w.Flush()
		},
	}
	del := &cobra.Command{
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
	cmd.AddCommand(create, list, del)
	root.AddCommand(cmd)
}

// tokenClient is an API client on --kubeconfig (default <data-dir>/admin.kubeconfig).
func tokenClient() (kubernetes.Interface, error) {
	path := tokenFlags.kubeconfig
	if path == "" {
		path = filepath.Join(globals.dataDir, "admin.kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	return kubernetes.NewForConfig(cfg)
}
