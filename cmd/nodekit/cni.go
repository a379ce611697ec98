package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/install"
	"github.com/nodekit/nodekit/cni/netconf"
)

// `nodekit cni …`: install the nodekit-cni plugin and write or check the node's CNI network config, the
// steps the agent performs at start-up, available by hand for operators.
func init() {
	cni := &cobra.Command{Use: "cni", Short: "Install nodekit's CNI plugin and manage the node's CNI network config"}
	cni.AddCommand(cniInstallCmd(), cniWriteConfigCmd(), cniReadyCmd())
	root.AddCommand(cni)
}

func cniInstallCmd() *cobra.Command {
	var src, binDir string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Copy the nodekit-cni plugin into the CNI bin dir (atomically)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if src == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				src = filepath.Join(filepath.Dir(exe), netconf.PluginType)
			}
			dst, err := install.Install(src, binDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), dst)
			return nil
		},
	}
	cmd.Flags().StringVar(&src, "src", "", "the built nodekit-cni (default: nodekit-cni next to this executable)")
	cmd.Flags().StringVar(&binDir, "bin-dir", "/opt/cni/bin", "CNI bin dir the runtime searches")
	return cmd
}

func cniWriteConfigCmd() *cobra.Command {
	var o config.Options
	cmd := &cobra.Command{
		Use:   "write-config",
		Short: "Write the node's conflist from its podCIDR and the cluster CIDR (atomically, validated)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.DataDir == "" {
				o.DataDir = agent.Config{DataDir: globals.dataDir}.Paths().CNI
			}
			path, err := config.Write(o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Path, "path", config.DefaultPath, "conflist path")
	f.StringVar(&o.PodCIDR, "pod-cidr", "", "the node's podCIDR (required)")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", "", "the cluster's pod CIDR (required)")
	f.StringVar(&o.NetworkName, "network-name", config.DefaultNetworkName, "the conflist's network name")
	f.StringVar(&o.Bridge, "bridge", netconf.DefaultBridge, "node bridge name")
	f.IntVar(&o.MTU, "mtu", netconf.DefaultMTU, "pod interface MTU in bytes")
	f.StringVar(&o.DataDir, "ipam-dir", "", "IPAM state directory (default <data-dir>/cni)")
	f.StringVar(&o.CNIVersion, "cni-version", config.CNIVersion, `conflist cniVersion ("1.0.0" for containerd 1.x)`)
	f.StringSliceVar(&o.BinDirs, "bin-dir", nil, "validate against the plugin installed in these CNI bin dirs")
	return cmd
}

func cniReadyCmd() *cobra.Command {
	var binDirs []string
	cmd := &cobra.Command{
		Use:   "ready [conflist]",
		Short: "Exit 0 when the node's CNI network config is in place and valid",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := config.DefaultPath
			if len(args) == 1 {
				path = args[0]
			}
			if err := config.Ready(cmd.Context(), path, binDirs...); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ready:", path)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&binDirs, "bin-dir", nil, "also check the plugin installed in these CNI bin dirs")
	return cmd
}
