package main

import (
	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/cluster"
)

func init() {
	var purge bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop 'nodekit up' and remove its pods, containers, rules and bridge (--purge: its data too)",
		Long: `Stops a running 'nodekit up' on --data-dir (and any component it left behind), then removes every
pod and container through CRI (their network namespaces and veths go with them), stops the managed
containerd, unmounts what is mounted under the data dir, and removes the proxy's iptables rules, the CNI
plugin's chains, the node bridge and the pods' log directories. The cluster state (etcd) is kept, so
'nodekit up' starts again from it.

--purge also removes the data directory (etcd, PKI, kubeconfigs, images, containerd root, logs), the CNI
conflist and the CNI IPAM store: the host is as before the first 'nodekit up'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Down(cmd.Context(), cluster.DownOptions{DataDir: globals.dataDir, Purge: purge})
		},
	}
	cmd.Flags().BoolVar(&purge, cluster.FlagPurge, false, "also remove the data directory, the CNI conflist and the IPAM store")
	root.AddCommand(cmd)
}
