package main

import "github.com/nodekit/nodekit/crictl"

// The crictl subcommand: `nodekit crictl ps`, or `crictl ps` through a symlink named crictl.
func init() { root.AddCommand(crictl.NewCommand()) }
