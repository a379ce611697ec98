package main

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/proxy"
)

func init() {
	var (
		kubeconfig, mode, clusterCIDR, nodeName, metricsAddr, healthzAddr, scheduler, netnsPath string
		minSync, syncPeriod                                                                     time.Duration
		cleanup, localhostNodePorts                                                             bool
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy: program iptables, nftables or IPVS so Services reach their endpoints",
		Long: "Watches Services and EndpointSlices and writes the node's Service routing into the kernel\n" +
			"(iptables mode by default, nftables or IPVS). With --cleanup it removes every rule, chain, ipset and\n" +
			"interface the proxy owns and exits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			var netns ns.NetNS
			if netnsPath != "" {
				var err error
				if netns, err = ns.GetNS(netnsPath); err != nil {
					return fmt.Errorf("--netns %s: %w", netnsPath, err)
				}
				defer netns.Close()
			}
			if cleanup {
				if netns != nil {
					return netns.Do(func(ns.NetNS) error { return proxy.Cleanup(ctx) })
				}
				return proxy.Cleanup(ctx)
			}
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
			}
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			p, err := proxy.New(proxy.Config{
				Client: client, Mode: proxy.Mode(mode), NodeName: nodeName, ClusterCIDR: clusterCIDR,
				MinSyncPeriod: minSync, SyncPeriod: syncPeriod, MetricsAddr: metricsAddr, HealthzAddr: healthzAddr,
				IPVSScheduler: scheduler, LocalhostNodePorts: localhostNodePorts, NetNS: netns,
			})
			if err != nil {
				return err
			}
			return p.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file to reach the API server")
	f.StringVar(&mode, "proxy-mode", string(proxy.ModeIPTables), "backend: iptables, ipvs or nftables")
	f.StringVar(&clusterCIDR, "cluster-cidr", "", "pod network CIDR; ClusterIP traffic from outside it is masqueraded")
	f.StringVar(&nodeName, "hostname-override", "", "this node's name (default: the hostname), for traffic policy Local")
	f.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:10249", "host:port serving /metrics (kube-proxy's metric names) and /debug/services; empty disables")
	f.StringVar(&healthzAddr, "healthz-bind-address", "0.0.0.0:10256", "host:port serving /healthz and /livez (kube-proxy's); empty disables")
	f.StringVar(&scheduler, "ipvs-scheduler", "rr", "IPVS scheduler (rr, lc, sh, ...)")
	f.DurationVar(&minSync, "min-sync-period", time.Second, "least time between two syncs")
	f.DurationVar(&syncPeriod, "sync-period", 30*time.Second, "most time between two syncs")
	f.BoolVar(&localhostNodePorts, "localhost-nodeports", false, "answer NodePorts on 127.0.0.0/8 too (sets route_localnet)")
	f.StringVar(&netnsPath, "netns", "", "network namespace (a path such as /run/netns/NAME) to write the rules in; the API is reached from the caller's namespace")
	f.BoolVar(&cleanup, "cleanup", false, "remove every rule, chain, ipset and interface the proxy owns, then exit")
	root.AddCommand(cmd)
}
