// Command nodekit is the single nodekit binary: a Kubernetes node stack (kubelet, CNI plugin, service proxy,
// crictl-like CLI) and a minimal bundled control plane, each reached as a subcommand.
//
// Subcommands register themselves from their own file in this package (one file per component), so this
// file holds only the root command, the shared flags and the logging setup. When the binary is invoked
// under another name that matches a subcommand (for example through a `crictl` symlink), that subcommand
// runs as if it had been named first.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/internal/cli"
	"github.com/nodekit/nodekit/internal/logging"
)

// globalFlags are the flags every subcommand shares.
type globalFlags struct {
	dataDir  string
	logLevel string
	logJSON  bool
}

var (
	globals globalFlags
	root    = &cobra.Command{
		Use:           "nodekit",
		Short:         "A Kubernetes node stack and a minimal bundled control plane",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(globals.logLevel, globals.logJSON)
		},
	}
)

func init() {
	pf := root.PersistentFlags()
	pf.StringVar(&globals.dataDir, cli.FlagDataDir, cluster.DefaultDataDir, "directory for nodekit's persistent state (containerd root, etcd, PKI, images)")
	pf.StringVar(&globals.logLevel, cli.FlagLogLevel, "info", "log level: debug, info, warn or error")
	pf.BoolVar(&globals.logJSON, cli.FlagLogJSON, false, "write logs as JSON lines instead of key=value text")
}

// setupLogging installs the process-wide slog handler on stderr, klog (client-go, the apiserver
// libraries) included.
func setupLogging(level string, asJSON bool) error {
	h, err := logging.NewHandler(os.Stderr, level, asJSON)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logging.Install(h)
	return nil
}

// argsForInvocation rewrites os.Args so that `crictl ps` behaves like `nodekit crictl ps` when the binary
// is reached through a symlink named after a subcommand.
func argsForInvocation(args []string) []string {
	name := strings.TrimSuffix(filepath.Base(args[0]), ".exe")
	if name == root.Name() {
		return args[1:]
	}
	for _, c := range root.Commands() {
		if c.Name() == name {
			return append([]string{name}, args[1:]...)
		}
	}
	return args[1:]
}

func main() {
	root.SetArgs(argsForInvocation(os.Args))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nodekit:", err)
		os.Exit(1)
	}
}
