package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/crictl"
)

// The crictl subcommand: `nodekit crictl ps`, or `crictl ps` through a symlink named crictl. A failure
// ends the process with crictl's exit status (an exec'd command's own), not main's 1.
func init() {
	cmd := crictl.NewCommand()
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := run(c, args); err != nil {
			os.Exit(crictl.Exit(c.ErrOrStderr(), "nodekit", err))
		}
		return nil
	}
	root.AddCommand(cmd)
}
