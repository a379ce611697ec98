package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	cniconfig "github.com/nodekit/nodekit/cni/config"
	cniinstall "github.com/nodekit/nodekit/cni/install"
	"github.com/nodekit/nodekit/cni/netconf"
	cninetwork "github.com/nodekit/nodekit/cni/network"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/internal/localpath"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/kubelet/cgroups"
	kubeletconfig "github.com/nodekit/nodekit/kubelet/config"
	"github.com/nodekit/nodekit/kubelet/metrics"
	"github.com/nodekit/nodekit/kubelet/nodestatus"
	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
)

// startRuntime connects to the CRI runtime: Kubelet.ContainerRuntimeEndpoint, or the managed containerd
// under Paths().Containerd with nodekit-cni installed and the image archives of Paths().Images imported.
// The returned func stops it (a managed containerd; pods keep running under their shims).
func (a *agent) startRuntime(ctx context.Context) (stop func(), err error) {
	kc := &a.cfg.Kubelet
	rcfg := containerd.Config{Endpoint: kc.ContainerRuntimeEndpoint, Dir: a.paths.Containerd, LogFile: a.paths.ContainerdLog,
		CNIConfDir: a.cfg.CNIConfDir, CgroupDriver: kc.CgroupDriver}
	if rcfg.Endpoint == "" {
		rcfg.ImagesDir = a.paths.Images
		if rcfg.CNIBinDirs, err = installCNIPlugin(a.paths.CNIBin); err != nil {
			return nil, err
		}
		a.managed = true
	}
	// The network the runtime loads, for the agent's CNI STATUS and GC: the managed containerd's plugin
	// dirs, an external runtime's when --cni-bin-dir names them, else where nodekit-cni would be.
	a.network = cninetwork.Network{ConfDir: filepath.Dir(a.paths.Conflist), BinDirs: rcfg.CNIBinDirs, CacheDir: a.paths.CNICache}
	a.checkNetwork = a.managed || a.cfg.CNIBinDir != ""
	switch {
	case !a.managed && a.cfg.CNIBinDir != "":
		a.network.BinDirs = []string{a.cfg.CNIBinDir}
	case !a.managed:
		a.network.BinDirs = cniBinDirs(a.paths.CNIBin)
	}
	sup, err := containerd.New(ctx, rcfg)
	if err != nil {
		return nil, err
	}
	if err := sup.Start(ctx); err != nil {
		sup.Stop(context.Background())
		return nil, err
	}
	a.pinned = []string{bundled.Pause}
	for _, img := range sup.Imported() {
		a.pinned = append(a.pinned, img.Name)
	}
	var opts []cri.Option
	if d := kc.RuntimeRequestTimeout.Duration; d > 0 {
		opts = append(opts, cri.WithTimeout(d)) // runtimeRequestTimeout (RunPodSandbox gets twice that)
	}
	if kc.ImageServiceEndpoint != "" {
		opts = append(opts, cri.WithImageEndpoint(kc.ImageServiceEndpoint))
	}
	// The agent's own connection survives containerd restarts (gRPC reconnects to the same socket).
	if a.rt, err = cri.Dial(ctx, sup.Endpoint(), opts...); err != nil {
		sup.Stop(context.Background())
		return nil, err
	}
	// The kubelet's cgroup driver follows the runtime's; a managed containerd was configured with
	// kc.CgroupDriver (or DetectCgroupDriver's choice when unset) and reports the same.
	cfgPath := a.cfg.ContainerdConfig
	if cfgPath == "" {
		cfgPath = containerd.DefaultConfigPath
	}
	if a.managed {
		cfgPath = sup.ConfigPath()
	}
	src, known, err := runtimeCgroupDriver(ctx, a.rt.CgroupDriver, cfgPath, containerd.ConfigCgroupDriver)
	if err == nil {
		kc.CgroupDriver, err = decideCgroupDriver(kc.CgroupDriver, src, known)
	}
	if !known {
		src.from = "configuration (the runtime does not report one)"
	}
	if err != nil {
		a.rt.Close()
		sup.Stop(context.Background())
		return nil, err
	}
	a.log.Info("cgroup driver", "driver", kc.CgroupDriver, "from", src.from, "cgroupV2", cgroups.IsV2(cgroups.DefaultMount))
	return func() { a.rt.Close(); sup.Stop(context.Background()) }, nil
}

// newKubelet makes the kubelet from the KubeletConfiguration, then TuneKubelet, and hands it to OnKubelet.
func (a *agent) newKubelet(probes kubelet.ProbeManager, m *metrics.Metrics) (*kubelet.Kubelet, error) {
	kc := &a.cfg.Kubelet
	var clusterDNS []net.IP
	for _, s := range kc.ClusterDNS {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("clusterDNS: %q is not an IP address", s)
		}
		clusterDNS = append(clusterDNS, ip)
	}
	logPolicy, err := kubeletconfig.LogPolicy(kc)
	if err != nil {
		return nil, err
	}
	gcPolicy, err := kubeletconfig.ImageGCPolicy(kc)
	if err != nil {
		return nil, err
	}
	thresholds, err := kubeletconfig.EvictionThresholds(kc)
	if err != nil {
		return nil, err
	}
	cfg := kubelet.Config{
		NodeName: a.nodeName, NodeIPs: []net.IP{a.nodeIP}, Runtime: a.rt.Runtime(), Images: a.rt.Image(), Client: a.client,
		Recorder: a.recorder, ProbeManager: probes, Metrics: m, Logger: a.log,
		RootDir: a.paths.KubeletRoot, PodLogsDir: kc.PodLogsDir, CgroupRoot: kc.CgroupRoot, CgroupDriver: kc.CgroupDriver,
		ClusterDNS: clusterDNS, ClusterDomain: kc.ClusterDomain, SyncFrequency: kc.SyncFrequency.Duration,
		ContainerLogs: logPolicy, ContainerLogMonitorInterval: kc.ContainerLogMonitorInterval.Duration,
		ImageGC: gcPolicy, PinnedImages: a.pinned, EvictionThresholds: thresholds,
		EvictionPressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
		EvictionMaxPodGracePeriod:        int64(kc.EvictionMaxPodGracePeriod),
		NetworkGC:                        a.networkGC,
		AllowedUnsafeSysctls:             kc.AllowedUnsafeSysctls,
	}
	if kc.ResolverConfig != nil {
		cfg.ResolvConf = *kc.ResolverConfig
	}
	if a.cfg.TuneKubelet != nil {
		a.cfg.TuneKubelet(&cfg)
	}
	kl, err := kubelet.New(cfg)
	if err != nil {
		return nil, err
	}
	if a.cfg.OnKubelet != nil {
		a.cfg.OnKubelet(kl)
	}
	return kl, nil
}

// newNodeStatus makes the node status controller: registration, status, Lease, and the conflist
// (Paths().Conflist) written from the Node's podCIDR.
func (a *agent) newNodeStatus(ctx context.Context, pressure nodestatus.Pressure) (*nodestatus.Controller, error) {
	kc := &a.cfg.Kubelet
	rv, err := a.rt.Version(ctx)
	if err != nil {
		return nil, err
	}
	cniVersion := cniconfig.VersionForRuntime(rv.RuntimeName, rv.RuntimeVersion)
	machine, err := nodestatus.ReadMachine(a.paths.KubeletRoot)
	if err != nil {
		return nil, err
	}
	var networkStatus func(context.Context) error
	if a.checkNetwork {
		// containerd 1.x reports NetworkReady from the config's presence alone; where the agent does not
		// know an external runtime's plugin dir, CRI Status alone decides.
		networkStatus = func(ctx context.Context) error {
			if err := a.network.Status(ctx); err != nil && !errors.Is(err, cninetwork.ErrNoConfig) {
				return err
			}
			return nil
		}
	}
	return nodestatus.New(nodestatus.Config{
		NetworkStatus: networkStatus,
		NodeName:      a.nodeName, Client: a.client, Runtime: a.rt.Runtime(), Images: a.rt.Image(), NodeIP: a.nodeIP,
		Labels: a.labels, Annotations: map[string]string{localpath.NodeDirAnnotation: a.paths.Storage}, Taints: kc.RegisterWithTaints, Machine: machine, MaxPods: kc.MaxPods, KubeletPort: kc.Port,
		UpdateFrequency: kc.NodeStatusUpdateFrequency.Duration, ReportFrequency: kc.NodeStatusReportFrequency.Duration,
		LeaseDurationSeconds: kc.NodeLeaseDurationSeconds, Pressure: pressure,
		OnPodCIDRs: func(cidrs []string) {
			path, err := cniconfig.Write(cniconfig.Options{Path: a.paths.Conflist, PodCIDR: cidrs[0],
				ClusterCIDR: a.cfg.ClusterCIDR, CNIVersion: cniVersion, DataDir: a.paths.CNI})
			if err != nil {
				slog.Error("writing CNI config", "node", a.nodeName, "err", err)
				return
			}
			slog.Info("CNI config written", "node", a.nodeName, "path", path, "podCIDR", cidrs[0])
		},
	})
}

// loadClientCA returns the CA pool that verifies kubelet server clients: file (--client-ca-file), else
// the cluster CA the kubeconfig trusts.
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

// installCNIPlugin copies nodekit-cni (next to this executable) into binDir and returns the CNI bin dirs
// for the managed containerd: binDir first, then the existing reference plugin dirs (loopback and
// friends).
func installCNIPlugin(binDir string) ([]string, error) {
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
	return cniBinDirs(binDir), nil
}

// cniBinDirs is binDir, then those of containerd.DefaultCNIBinDirs that exist.
func cniBinDirs(binDir string) []string {
	dirs := []string{binDir}
	for _, d := range containerd.DefaultCNIBinDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && d != binDir {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// networkGC is the kubelet's NetworkGC: CNI GC of the pod network with every sandbox the runtime lists
// as a valid attachment on eth0 (the interface CRI runtimes give a pod's network).
func (a *agent) networkGC(ctx context.Context, sandboxIDs []string) error {
	valid := make([]cnitypes.GCAttachment, len(sandboxIDs))
	for i, id := range sandboxIDs {
		valid[i] = cnitypes.GCAttachment{ContainerID: id, IfName: "eth0"}
	}
	return a.network.GC(ctx, valid)
}
