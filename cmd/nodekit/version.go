package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/version"
)

func init() {
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print nodekit's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "nodekit %s\n", version.Version)
		},
	})
}
