package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/proxy"
)

// proxyFlags are `nodekit agent`'s service proxy flags: the agent runs the proxy in-process, as the
// node's kube-proxy (`nodekit proxy` still runs it alone).
type proxyFlags struct {
	disable           bool
	mode, metricsAddr string
}

func (p *proxyFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&p.disable, "disable-proxy", false, "do not run the service proxy (when another kube-proxy serves this node)")
	fs.StringVar(&p.mode, "proxy-mode", string(proxy.ModeIPTables), "service proxy backend: iptables, ipvs or nftables")
	fs.StringVar(&p.metricsAddr, "proxy-metrics-bind-address", "127.0.0.1:10249", "host:port of the proxy's /healthz and /metrics; empty disables")
}

// build makes the service proxy for nodeName with the node's client (nil when --disable-proxy); it logs
// through slog.Default() with component=proxy.
func (p *proxyFlags) build(client kubernetes.Interface, nodeName, clusterCIDR string) (*proxy.Proxier, error) {
	if p.disable {
		slog.Info("service proxy disabled (--disable-proxy)", "node", nodeName)
		return nil, nil
	}
	px, err := proxy.New(proxy.Config{Client: client, Mode: proxy.Mode(p.mode), NodeName: nodeName, ClusterCIDR: clusterCIDR,
		MetricsAddr: p.metricsAddr})
	if err != nil {
		return nil, fmt.Errorf("service proxy: %w", err)
	}
	return px, nil
}
