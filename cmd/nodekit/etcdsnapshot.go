package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/server"
)

func init() {
	var endpoints []string
	var caFile, certFile, keyFile, dataDir string
	cmd := &cobra.Command{
		Use:   "etcd-snapshot",
		Short: "Save or restore a snapshot of the control plane's etcd",
	}
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Write a consistent snapshot of the running etcd to FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := &etcd.Store{Endpoints: endpoints, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
			if caFile == "" && certFile == "" && keyFile == "" {
				// The embedded member's etcd CA and the API server's client pair, from the data dir.
				s.CAFile, s.CertFile, s.KeyFile = etcd.ClientFiles(server.Config{DataDir: globals.dataDir}.Paths().PKIDir)
			}
			n, err := etcd.Save(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			slog.Info("etcd snapshot saved", "file", args[0], "bytes", n)
			return nil
		},
	}
	save.Flags().StringSliceVar(&endpoints, "etcd-servers", []string{"https://" + server.DefaultEtcdClientAddr}, "etcd client URLs")
	save.Flags().StringVar(&caFile, "etcd-cafile", "", "etcd CA file (default <data-dir>/pki/etcd/ca.crt when no TLS file is given)")
	save.Flags().StringVar(&certFile, "etcd-certfile", "", "etcd client certificate (default <data-dir>/pki/apiserver-etcd-client.crt)")
	save.Flags().StringVar(&keyFile, "etcd-keyfile", "", "etcd client key (default <data-dir>/pki/apiserver-etcd-client.key)")
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore FILE into a fresh etcd data dir (default <data-dir>/etcd, which must be empty); run with the server stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := dataDir
			if dir == "" {
				dir = server.Config{DataDir: globals.dataDir}.Paths().EtcdDir
			}
			n, err := etcd.Restore(cmd.Context(), args[0], dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d keys into %s\n", n, dir)
			return nil
		},
	}
	restore.Flags().StringVar(&dataDir, "etcd-data-dir", "", "target etcd data dir (default <data-dir>/etcd)")
	cmd.AddCommand(save, restore)
	root.AddCommand(cmd)
}
