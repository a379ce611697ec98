package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	certutil "k8s.io/client-go/util/cert"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"

	cniconfig "github.com/nodekit/nodekit/cni/config"
	cniinstall "github.com/nodekit/nodekit/cni/install"
	"github.com/nodekit/nodekit/cni/netconf"
	"github.com/nodekit/nodekit/kubelet"
	kubeletconfig "github.com/nodekit/nodekit/kubelet/config"
	"github.com/nodekit/nodekit/kubelet/metrics"
	"github.com/nodekit/nodekit/kubelet/nodestatus"
	"github.com/nodekit/nodekit/kubelet/prober"
	"github.com/nodekit/nodekit/kubelet/server"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
)

// agentFlags are `nodekit agent`'s own flags; the KubeletConfiguration flags live in kubelet/config.
type agentFlags struct {
	server, kubeconfig, nodeName, nodeIP, nodeLabels, rootDir string
	cniBinDir, cniConfDir, clusterCIDR, imagesDir             string
	join                                                      joinFlags
	proxy                                                     proxyFlags
	kubelet                                                   *kubeletconfig.Flags
}

func init() {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: the kubelet (node registration, heartbeats, pods over CRI, :10250 server) on containerd, and the service proxy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runAgent(ctx, &f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.server, "server", "", "API server URL (overrides the kubeconfig's)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials (system:node:<name>)")
	fs.StringVar(&f.nodeName, "node-name", "", "Node name (default: the hostname, lowercased)")
	fs.StringVar(&f.nodeIP, "node-ip", "", "InternalIP of the node (default: the address of the default-route interface)")
	fs.StringVar(&f.nodeLabels, "node-labels", "", "labels added at registration: key=value,...")
	fs.StringVar(&f.rootDir, "root-dir", "", "kubelet state directory (default <data-dir>/kubelet)")
	fs.StringVar(&f.cniBinDir, "cni-bin-dir", "", "where the managed containerd's nodekit-cni plugin is installed (default <data-dir>/cni/bin; /usr/lib/cni and /opt/cni/bin are searched too)")
	fs.StringVar(&f.cniConfDir, "cni-conf-dir", "/etc/cni/net.d", "CNI config directory; the agent writes its conflist here once the node has a podCIDR")
	fs.StringVar(&f.clusterCIDR, "cluster-cidr", "10.244.0.0/16", "the cluster's pod network, containing every node's podCIDR")
	fs.StringVar(&f.imagesDir, "images-dir", "", "OCI image archives imported into the managed containerd at start (default <data-dir>/images)")
	f.join.addFlags(fs)
	f.proxy.addFlags(fs)
	f.kubelet = kubeletconfig.AddFlags(fs)
	root.AddCommand(cmd)
}

// runAgent wires the runtime, the kubelet and its node half together and runs them until ctx ends.
func runAgent(ctx context.Context, f *agentFlags) error {
	klog.SetSlogLogger(slog.Default()) // client-go and the lease controller log through klog
	kc, err := f.kubelet.Resolve()
	if err != nil {
		return err
	}
	nodeName, err := nodeutil.GetHostname(f.nodeName)
	if err != nil {
		return fmt.Errorf("--node-name: %w", err)
	}
	var nodeIP net.IP
	if f.nodeIP != "" {
		if nodeIP = net.ParseIP(f.nodeIP); nodeIP == nil {
			return fmt.Errorf("--node-ip: %q is not an IP address", f.nodeIP)
		}
	} else if nodeIP, err = nodestatus.DefaultRouteIP(); err != nil {
		return err
	}
	labels, err := kubeletconfig.ParseLabels(f.nodeLabels)
	if err != nil {
		return fmt.Errorf("--node-labels: %w", err)
	}
	rootDir := f.rootDir
	if rootDir == "" {
		rootDir = filepath.Join(globals.dataDir, "kubelet")
	}
	if err := os.MkdirAll(rootDir, 0o750); err != nil {
		return err
	}
	if err := f.join.run(ctx, f.server, f.kubeconfig, nodeName); err != nil {
		return err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags(f.server, f.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig/--server: %w", err)
	}
	// Upstream's kubeAPIQPS/kubeAPIBurst: client-go's default 5/10 would throttle status writes and events.
	restCfg.QPS, restCfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	clientCA, err := loadClientCA(kc.Authentication.X509.ClientCAFile, restCfg)
	if err != nil {
		return err
	}

	// The runtime: an existing endpoint, or nodekit's managed containerd with the bundled images.
	rcfg := containerd.Config{Endpoint: kc.ContainerRuntimeEndpoint, Dir: filepath.Join(globals.dataDir, "containerd"),
		CNIConfDir: f.cniConfDir, CgroupDriver: kc.CgroupDriver}
	if rcfg.Endpoint == "" {
		if rcfg.CNIBinDirs, err = installCNIPlugin(f.cniBinDir); err != nil {
			return err
		}
	}
	sup, err := containerd.New(ctx, rcfg)
	if err != nil {
		return err
	}
	if err := sup.Start(ctx); err != nil {
		return err
	}
	defer sup.Stop(context.Background())
	if sup.Managed() {
		imagesDir := f.imagesDir
		if imagesDir == "" {
			imagesDir = filepath.Join(globals.dataDir, "images")
		}
		if err := importImages(ctx, sup.Address(), imagesDir); err != nil {
			return err
		}
	}
	criOpts := []cri.Option{cri.WithTimeout(kc.RuntimeRequestTimeout.Duration)}
	if kc.ImageServiceEndpoint != "" {
		criOpts = append(criOpts, cri.WithImageEndpoint(kc.ImageServiceEndpoint))
	}
	// The agent's own connection survives containerd restarts (gRPC reconnects to the same socket).
	rt, err := cri.Dial(ctx, sup.Endpoint(), criOpts...)
	if err != nil {
		return err
	}
	defer rt.Close()
	rv, err := rt.Version(ctx)
	if err != nil {
		return err
	}
	cniVersion := cniconfig.VersionForRuntime(rv.RuntimeName, rv.RuntimeVersion)

	var clusterDNS []net.IP
	for _, s := range kc.ClusterDNS {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("clusterDNS: %q is not an IP address", s)
		}
		clusterDNS = append(clusterDNS, ip)
	}
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer events.Shutdown()
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: nodeName})
	probes := prober.New(prober.Options{Runtime: rt.Runtime(), Recorder: recorder})
	defer probes.Close()
	kubeletMetrics := metrics.New(nodeName, rt.Runtime())
	kl, err := kubelet.New(kubelet.Config{
		NodeName: nodeName, NodeIPs: []net.IP{nodeIP}, Runtime: rt.Runtime(), Images: rt.Image(), Client: client,
		Recorder: recorder, ProbeManager: probes, Metrics: kubeletMetrics,
		RootDir: rootDir, PodLogsDir: kc.PodLogsDir, CgroupDriver: kc.CgroupDriver, ClusterDNS: clusterDNS,
		ClusterDomain: kc.ClusterDomain, SyncFrequency: kc.SyncFrequency.Duration,
	})
	if err != nil {
		return err
	}
	machine, err := nodestatus.ReadMachine(rootDir)
	if err != nil {
		return err
	}
	cniConf := filepath.Join(f.cniConfDir, "10-nodekit.conflist")
	ns, err := nodestatus.New(nodestatus.Config{
		NodeName: nodeName, Client: client, Runtime: rt.Runtime(), Images: rt.Image(), NodeIP: nodeIP,
		Labels: labels, Taints: kc.RegisterWithTaints, Machine: machine, MaxPods: kc.MaxPods, KubeletPort: kc.Port,
		UpdateFrequency: kc.NodeStatusUpdateFrequency.Duration, ReportFrequency: kc.NodeStatusReportFrequency.Duration,
		LeaseDurationSeconds: kc.NodeLeaseDurationSeconds,
		OnPodCIDRs: func(cidrs []string) {
			path, err := cniconfig.Write(cniconfig.Options{Path: cniConf, PodCIDR: cidrs[0],
				ClusterCIDR: f.clusterCIDR, CNIVersion: cniVersion, DataDir: filepath.Join(globals.dataDir, "cni")})
			if err != nil {
				slog.Error("writing CNI config", "node", nodeName, "err", err)
				return
			}
			slog.Info("CNI config written", "node", nodeName, "path", path, "podCIDR", cidrs[0])
		},
	})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{
		Address: kc.Address, Port: kc.Port, TLSCertFile: kc.TLSCertFile, TLSKeyFile: kc.TLSPrivateKeyFile,
		CertDir: filepath.Join(rootDir, "pki"), NodeName: nodeName, NodeIPs: []net.IP{nodeIP}, ClientCA: clientCA,
		Authorizer: server.GroupAuthorizer{"system:masters"},
		Pods:       kl, Runtime: rt.Runtime(), Images: rt.Image(), RootDir: rootDir,
		Metrics: kubeletMetrics,
	})
	if err != nil {
		return err
	}
	px, err := f.proxy.build(client, nodeName, f.clusterCIDR)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ns.Run(gctx) })
	g.Go(func() error { return kl.Run(gctx) })
	g.Go(func() error { return srv.Serve(gctx) })
	if px != nil {
		g.Go(func() error { return px.Run(gctx) })
	}
	notifySystemd(gctx, "agent", ns.Registered())
	if kc.StaticPodPath != "" {
		sink, _ := any(kl).(static.Sink)
		if sink == nil {
			slog.Warn("the kubelet takes no static pods yet: only mirror pods are kept", "node", nodeName, "dir", kc.StaticPodPath)
		}
		src, err := static.New(static.Config{Dir: kc.StaticPodPath, NodeName: nodeName, Client: client, Sink: sink, Period: kc.FileCheckFrequency.Duration})
		if err != nil {
			return err
		}
		g.Go(func() error {
			select { // mirror pods need the Node (their owner)
			case <-ns.Registered():
			case <-gctx.Done():
				return gctx.Err()
			}
			return src.Run(gctx)
		})
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		slog.Info("agent stopped", "node", nodeName)
		return nil
	}
	return err
}

// loadClientCA returns the CA pool that verifies kubelet server clients: --client-ca-file, else the
// cluster CA the kubeconfig trusts.
func loadClientCA(file string, rc *rest.Config) (*x509.CertPool, error) {
	if file == "" {
		file = rc.TLSClientConfig.CAFile
	}
	var certs []*x509.Certificate
	var err error
	switch {
	case file != "":
		certs, err = certutil.CertsFromFile(file)
	case len(rc.TLSClientConfig.CAData) > 0:
		certs, err = certutil.ParseCertsPEM(rc.TLSClientConfig.CAData)
	default:
		return nil, errors.New("client CA: set --client-ca-file (authentication.x509.clientCAFile) or use a kubeconfig with a cluster CA")
	}
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// installCNIPlugin copies nodekit-cni (next to this executable) into binDir (default
// <data-dir>/cni/bin) and returns the CNI bin dirs for the managed containerd: binDir first, then the
// existing reference plugin dirs (loopback and friends).
func installCNIPlugin(binDir string) ([]string, error) {
	if binDir == "" {
		binDir = filepath.Join(globals.dataDir, "cni", "bin")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	src := filepath.Join(filepath.Dir(exe), netconf.PluginType)
	if _, err := os.Stat(src); err == nil {
		dst, err := cniinstall.Install(src, binDir)
		if err != nil {
			return nil, err
		}
		slog.Info("CNI plugin installed", "path", dst)
	} else {
		slog.Warn("nodekit-cni not found next to the nodekit executable; pods need a CNI plugin in the bin dir", "looked_for", src, "bin_dir", binDir)
	}
	dirs := []string{binDir}
	for _, d := range containerd.DefaultCNIBinDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && d != binDir {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// importImages imports every archive of dir (missing dir: nothing to do) into the managed containerd.
func importImages(ctx context.Context, address, dir string) error {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	im, err := containerd.NewImporter(address)
	if err != nil {
		return err
	}
	defer im.Close()
	start := time.Now()
	imgs, err := im.ImportDir(ctx, dir, nil)
	if err != nil {
		return err
	}
	slog.Info("images imported", "dir", dir, "count", len(imgs), "took", time.Since(start).Round(time.Millisecond))
	return nil
}
