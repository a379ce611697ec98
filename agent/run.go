package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/certificate"
	nodeutil "k8s.io/component-helpers/node/util"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	cninetwork "github.com/nodekit/nodekit/cni/network"
	"github.com/nodekit/nodekit/cni/vxlan"
	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/internal/logging"
	"github.com/nodekit/nodekit/internal/proxystatus"
	"github.com/nodekit/nodekit/internal/sdnotify"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/kubelet/bootstrap"
	"github.com/nodekit/nodekit/kubelet/certmanager"
	kubeletconfig "github.com/nodekit/nodekit/kubelet/config"
	"github.com/nodekit/nodekit/kubelet/metrics"
	"github.com/nodekit/nodekit/kubelet/nodestatus"
	"github.com/nodekit/nodekit/kubelet/prober"
	"github.com/nodekit/nodekit/kubelet/processpods"
	"github.com/nodekit/nodekit/kubelet/server"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/runtime/cri"
)

// agent is one Run: the resolved identity and the clients the components share.
type agent struct {
	cfg      Config
	paths    Paths
	log      *slog.Logger
	nodeName string
	nodeIP   net.IP
	// clusterCIDR is ClusterCIDR parsed.
	clusterCIDR *net.IPNet
	labels      map[string]string
	rest        *rest.Config
	client      kubernetes.Interface
	// clientCerts rotates the node client certificate a.client authenticates with (rotateCertificates;
	// nil when off or when the kubeconfig has no client certificate).
	clientCerts *certmanager.Client
	rt          *cri.Client
	// pinned are the image references the kubelet's image GC never removes: the pause image and what the
	// agent's containerd imported from the images directory (labelled pinned).
	pinned   []string
	recorder record.EventRecorder
	// routeRecorder records the route controller's events (source nodekit-routes).
	routeRecorder record.EventRecorder
	// memoryLimit is GoMemoryLimit in bytes (0: none).
	memoryLimit int64
	// network is the pod network's CNI configuration and plugins, for the agent's own STATUS and GC.
	network cninetwork.Network
	// managed is true when the agent runs its own containerd; checkNetwork when the agent knows the
	// runtime's plugin dirs (managed, or --cni-bin-dir given) and checks the network's CNI STATUS.
	managed, checkNetwork bool
}

// Run runs the node agent with cfg until ctx ends, then stops it and returns nil: it joins the cluster
// (with Token), starts the runtime (an existing CRI endpoint, or the managed containerd with nodekit-cni
// installed and the bundled images imported), and runs the kubelet, the node status controller (which
// writes the conflist once the Node has a podCIDR), the kubelet server, the service proxy and the static
// pod source, telling systemd READY=1 once the Node is registered. The first component to fail stops
// the others; its error is returned. Invalid settings fail before anything starts, naming the flag.
func Run(ctx context.Context, cfg Config) error {
	a, err := newAgent(cfg)
	if err != nil {
		return err
	}
	if err := a.join(ctx); err != nil {
		return err
	}
	if err := a.connect(); err != nil {
		return err
	}
	if a.clientCerts != nil {
		a.clientCerts.Start()
		defer a.clientCerts.Stop()
	}
	a.setMemoryLimit()
	stopRuntime, err := a.startRuntime(ctx)
	if err != nil {
		return err
	}
	defer stopRuntime()
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	defer events.Shutdown()
	a.recorder = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: a.nodeName})
	a.routeRecorder = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodekit-routes", Host: a.nodeName})
	probes := cfg.ProbeManager
	if probes == nil {
		pm := prober.New(prober.Options{Runtime: a.rt.Runtime(), Recorder: a.recorder, Logger: a.log})
		defer pm.Close()
		probes = pm
	}
	err = a.run(ctx, probes)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		slog.Info("agent stopped", "node", a.nodeName)
		return nil
	}
	return err
}

// newAgent validates cfg (the KubeletConfiguration with kubelet/config's Validate, the cluster CIDR)
// and resolves the node's identity: name, InternalIP, labels.
func newAgent(cfg Config) (*agent, error) {
	a := &agent{cfg: cfg, paths: cfg.Paths(), log: cfg.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	var err error
	if a.nodeName, err = nodeutil.GetHostname(cfg.NodeName); err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagNodeName, err)
	}
	if cfg.NodeIP != "" {
		if a.nodeIP = net.ParseIP(cfg.NodeIP); a.nodeIP == nil {
			return nil, fmt.Errorf("--%s: %q is not an IP address", FlagNodeIP, cfg.NodeIP)
		}
	} else if a.nodeIP, err = nodestatus.DefaultRouteIP(); err != nil {
		return nil, err
	}
	if a.memoryLimit, err = parseMemoryLimit(cfg.GoMemoryLimit); err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagGoMemoryLimit, err)
	}
	if err := kubeletconfig.Validate(&cfg.Kubelet); err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	if _, a.clusterCIDR, err = net.ParseCIDR(cfg.ClusterCIDR); err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagClusterCIDR, err)
	}
	if !slices.Contains(podroutes.Backends, cfg.NetworkBackend) {
		return nil, fmt.Errorf("--%s: %q is not one of %v", FlagNetworkBackend, cfg.NetworkBackend, podroutes.Backends)
	}
	if cfg.NetworkBackend == podroutes.BackendVXLAN {
		if a.nodeIP.To4() == nil {
			return nil, fmt.Errorf("--%s: %s: the vxlan backend needs an IPv4 node IP", FlagNodeIP, a.nodeIP)
		}
		if err := (vxlan.Device{VNI: cfg.VXLANVNI, Port: 1, LocalIP: a.nodeIP}).Validate(); err != nil {
			return nil, fmt.Errorf("--%s: %w", FlagVXLANVNI, err)
		}
		if err := (vxlan.Device{VNI: 1, Port: cfg.VXLANPort, LocalIP: a.nodeIP}).Validate(); err != nil {
			return nil, fmt.Errorf("--%s: %w", FlagVXLANPort, err)
		}
	}
	// Checked before anything is started or written, as every other setting (the proxy itself is built last).
	if !cfg.DisableProxy && !slices.Contains(proxy.Modes, cfg.ProxyMode) {
		return nil, fmt.Errorf("--%s: %q is not one of %v", FlagProxyMode, cfg.ProxyMode, proxy.Modes)
	}
	a.labels = cfg.NodeLabels
	if a.labels == nil {
		a.labels = map[string]string{}
	}
	if err := os.MkdirAll(a.paths.KubeletRoot, 0o750); err != nil {
		return nil, err
	}
	// local-path volumes: only root on the host walks in; containers get their volume bind-mounted
	if err := os.MkdirAll(a.paths.Storage, 0o700); err != nil {
		return nil, err
	}
	return a, nil
}

// parseMemoryLimit parses --go-memory-limit: a non-negative quantity ("40Mi"), "" or "0" for none.
func parseMemoryLimit(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a quantity such as 40Mi: %w", s, err)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return q.Value(), nil
}

// setMemoryLimit sets the Go runtime's soft memory limit to GoMemoryLimit, unless $GOMEMLIMIT (which
// the runtime read at start) is set.
func (a *agent) setMemoryLimit() {
	if a.memoryLimit == 0 {
		return
	}
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		a.log.Info("Go memory limit from $GOMEMLIMIT", "node", a.nodeName, "GOMEMLIMIT", env)
		return
	}
	debug.SetMemoryLimit(a.memoryLimit)
	a.log.Info("Go memory limit set", "node", a.nodeName, "bytes", a.memoryLimit, "flag", "--"+FlagGoMemoryLimit)
}

// join joins the cluster (kubelet/bootstrap) when a token is set (Token, else $NODEKIT_TOKEN); an
// existing valid Kubeconfig is kept.
func (a *agent) join(ctx context.Context) error {
	token, caHash := a.cfg.Token, a.cfg.CAHash
	if token == "" {
		token = os.Getenv("NODEKIT_TOKEN")
	}
	if caHash == "" {
		caHash = os.Getenv("NODEKIT_CA_HASH")
	}
	switch {
	case token == "" && caHash != "":
		return fmt.Errorf("--%s: only meaningful with --%s", FlagCAHash, FlagToken)
	case token == "":
		return nil
	case caHash == "":
		return fmt.Errorf("--%s: required with --%s (the sha256:<hex> 'nodekit token create' prints), so the agent only trusts the right server", FlagCAHash, FlagToken)
	case a.cfg.Server == "":
		return fmt.Errorf("--%s: required with --%s (https://HOST:6443)", FlagServer, FlagToken)
	}
	return bootstrap.Join(ctx, bootstrap.Config{Server: a.cfg.Server, Token: token, CAHash: caHash, NodeName: a.nodeName, Kubeconfig: a.cfg.Kubeconfig,
		CertDir: a.paths.KubeletPKI})
}

// connect builds the node's API client from Kubeconfig and Server.
func (a *agent) connect() error {
	rc, err := clientcmd.BuildConfigFromFlags(a.cfg.Server, a.cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--%s/--%s: %w", FlagKubeconfig, FlagServer, err)
	}
	// Upstream's kubeAPIQPS/kubeAPIBurst: client-go's default 5/10 would throttle status writes and events.
	rc.QPS, rc.Burst = 50, 100
	// Protobuf, upstream's kubeAPIContentType: a node's pod, node and service watches decode with a
	// fraction of JSON's allocations (every object this client reads is a built-in type).
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	a.rest = rc
	tc := rc.TLSClientConfig
	switch {
	case !a.cfg.Kubelet.RotateCertificates:
	case len(tc.CertData) == 0 && tc.CertFile == "":
		a.log.Info("rotateCertificates: the kubeconfig has no client certificate to rotate", "node", a.nodeName, "kubeconfig", a.cfg.Kubeconfig)
	default:
		if a.clientCerts, err = certmanager.NewClient(certmanager.ClientConfig{NodeName: a.nodeName, Dir: a.paths.KubeletPKI,
			Kubeconfig: rc, Log: a.log}); err != nil {
			return fmt.Errorf("--%s (rotateCertificates): %w", FlagKubeconfig, err)
		}
		rc = a.clientCerts.Config
	}
	a.client, err = kubernetes.NewForConfig(rc)
	return err
}

// run builds the node's components on the runtime and runs them until one fails or ctx ends.
func (a *agent) run(ctx context.Context, probes kubelet.ProbeManager) error {
	kc := &a.cfg.Kubelet
	m := a.cfg.Metrics
	if m == nil {
		m = metrics.New(a.nodeName, a.rt.Runtime())
	}
	kl, err := a.newKubelet(probes, m)
	if err != nil {
		return err
	}
	ns, err := a.newNodeStatus(ctx, kl)
	if err != nil {
		return err
	}
	px, closeProxyLog, err := a.newProxy()
	if err != nil {
		return err
	}
	defer closeProxyLog()
	var procPods *processpods.Pods
	if a.cfg.ComponentPods {
		if procPods, err = processpods.New(processpods.Config{Dir: a.paths.Components, NodeName: a.nodeName, Client: a.client, Logger: a.log}); err != nil {
			return err
		}
	}
	var serving func() *tls.Certificate
	if kc.ServerTLSBootstrap && kc.TLSCertFile == "" {
		sm, err := a.newServingCerts(ns)
		if err != nil {
			return err
		}
		sm.Start()
		defer sm.Stop()
		serving = sm.Current
	}
	srv, err := a.newServer(kl, m, px, procPods, serving)
	if err != nil {
		return err
	}
	var src *static.Source
	if kc.StaticPodPath != "" {
		if src, err = static.New(static.Config{Dir: kc.StaticPodPath, NodeName: a.nodeName, Client: a.client, Sink: kl,
			Period: kc.FileCheckFrequency.Duration}); err != nil {
			return err
		}
	}
	routes, err := a.newRoutes()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ns.Run(gctx) })
	if routes != nil {
		g.Go(func() error { return routes.Run(gctx) })
	}
	g.Go(func() error { return kl.Run(gctx) })
	g.Go(func() error { return srv.Serve(gctx) })
	if px != nil {
		g.Go(func() error { return px.Run(gctx) })
	}
	// The mirror pod sources (static pods, component processes) start once the Node, their pods'
	// owner, is registered.
	var mirrorSources []func(context.Context) error
	if src != nil {
		mirrorSources = append(mirrorSources, src.Run)
	}
	if procPods != nil {
		mirrorSources = append(mirrorSources, procPods.Run)
	}
	for _, run := range mirrorSources {
		g.Go(func() error {
			select {
			case <-ns.Registered():
			case <-gctx.Done():
				return gctx.Err()
			}
			return run(gctx)
		})
	}
	sdnotify.Notify(gctx, Command, ns.Registered())
	return g.Wait()
}

// newRoutes makes the route controller of the node (podroutes) with its backend (host-gw or vxlan) in the
// agent's network namespace; nil with the none backend (what an earlier run made stays until `nodekit down`).
func (a *agent) newRoutes() (*podroutes.Controller, error) {
	if a.cfg.NetworkBackend == podroutes.BackendNone {
		a.log.Info("no route controller: pods on other nodes are reached by the operator's routing", "node", a.nodeName,
			"flag", "--"+FlagNetworkBackend+"="+podroutes.BackendNone)
		return nil, nil
	}
	return podroutes.New(podroutes.Config{Client: a.client, NodeName: a.nodeName, ClusterCIDR: a.clusterCIDR,
		Backend: a.cfg.NetworkBackend, NodeIP: a.nodeIP, VNI: a.cfg.VXLANVNI, Port: a.cfg.VXLANPort,
		Recorder: a.routeRecorder, Logger: a.log})
}

// newServingCerts makes the manager of the kubelet serving certificate (serverTLSBootstrap): its
// subjectAltNames are the node's name and InternalIP, the addresses the node status controller reports,
// requested once the Node is registered (the approver checks them against the Node's addresses).
func (a *agent) newServingCerts(ns *nodestatus.Controller) (certificate.Manager, error) {
	return certmanager.NewServing(certmanager.ServingConfig{Client: a.client, NodeName: a.nodeName, Dir: a.paths.KubeletPKI,
		Names: func() ([]string, []net.IP, bool) {
			select {
			case <-ns.Registered():
				return []string{a.nodeName}, []net.IP{a.nodeIP}, true
			default:
				return nil, nil, false
			}
		}})
}

// newProxy makes the service proxy for the node (nil with DisableProxy). It logs through
// slog.Default(); with ComponentPods, also to Paths().ProxyLog, and the agent records the proxy as
// the kube-proxy component (the agent's own process) there. The returned func closes that log file.
func (a *agent) newProxy() (*proxy.Proxier, func(), error) {
	nop := func() {}
	if a.cfg.DisableProxy {
		slog.Info("service proxy disabled (--"+FlagDisableProxy+")", "node", a.nodeName)
		if a.cfg.ComponentPods {
			if err := components.Remove(a.paths.Components, components.Proxy); err != nil {
				slog.Warn("component record not removed", "component", components.Proxy, "err", err)
			}
		}
		return nil, nop, nil
	}
	pc := proxy.Config{Client: a.client, Mode: a.cfg.ProxyMode, NodeName: a.nodeName,
		ClusterCIDR: a.cfg.ClusterCIDR, MetricsAddr: a.cfg.ProxyMetricsAddr, NetNS: a.cfg.ProxyNetNS,
		HealthzAddr: a.cfg.ProxyHealthzAddr}
	closeLog := nop
	if a.cfg.ComponentPods {
		fh, f, err := logging.OpenFile(a.paths.ProxyLog, "info")
		if err != nil {
			return nil, nop, fmt.Errorf("service proxy log file: %w", err)
		}
		closeLog = func() { f.Close() }
		pc.Logger = slog.New(slog.NewMultiHandler(slog.Default().Handler(), fh))
		if _, err := components.Started(a.paths.Components, components.Proxy, os.Getpid(), time.Now(), os.Args, a.paths.ProxyLog); err != nil {
			slog.Warn("component record not written", "component", components.Proxy, "err", err)
		}
	}
	if a.cfg.TuneProxy != nil {
		a.cfg.TuneProxy(&pc)
	}
	px, err := proxy.New(pc)
	if err != nil {
		closeLog()
		return nil, nop, fmt.Errorf("service proxy: %w", err)
	}
	return px, closeLog, nil
}

// newServer makes the kubelet server (:10250) over kl; it serves px's status (proxystatus), or
// Disabled when the node runs no proxy, and the logs of procPods' component pods.
// serving, when set, gives the kubelet-serving certificate (nil until one is issued).
func (a *agent) newServer(kl *kubelet.Kubelet, m *metrics.Metrics, px *proxy.Proxier, procPods *processpods.Pods, serving func() *tls.Certificate) (*server.Server, error) {
	kc := &a.cfg.Kubelet
	clientCA, err := loadClientCA(kc.Authentication.X509.ClientCAFile, a.rest)
	if err != nil {
		return nil, err
	}
	// upstream's kubelet: webhook authentication (client certificates, then TokenReview) and
	// authorization (SubjectAccessReview) against the API server, cached
	authn, authz, err := server.Webhook(a.client, server.WebhookOptions{ClientCA: clientCA,
		TokenCacheTTL: kc.Authentication.Webhook.CacheTTL.Duration, AuthorizedTTL: kc.Authorization.Webhook.CacheAuthorizedTTL.Duration,
		UnauthorizedTTL: kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration})
	if err != nil {
		return nil, err
	}
	if kc.Authentication.Webhook.Enabled != nil && !*kc.Authentication.Webhook.Enabled {
		authn = nil // client certificates only
	}
	if kc.Authorization.Mode == kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow {
		authz = nil
	}
	var processLogs func(namespace, pod, container string) (string, bool)
	if procPods != nil {
		processLogs = procPods.LogFile
	}
	return server.New(server.Config{
		Address: kc.Address, Port: kc.Port, TLSCertFile: kc.TLSCertFile, TLSKeyFile: kc.TLSPrivateKeyFile,
		CertDir: a.paths.KubeletPKI, Certificate: serving, NodeName: a.nodeName, NodeIPs: []net.IP{a.nodeIP}, ClientCA: clientCA,
		Authenticator: authn, Authorizer: authz,
		Pods: kl, Runtime: a.rt.Runtime(), Images: a.rt.Image(), RootDir: a.paths.KubeletRoot, PodCgroupStats: kl.PodCgroupStats,
		Metrics: m, EnableProfiling: kc.EnableProfilingHandler != nil && *kc.EnableProfilingHandler,
		ProxyStatus: proxyStatus(a.nodeName, px), ProcessLogs: processLogs,
	})
}

// proxyStatus is what the kubelet server publishes about the node's proxy px (nil: disabled).
func proxyStatus(node string, px *proxy.Proxier) func() proxystatus.Status {
	if px == nil {
		return func() proxystatus.Status { return proxystatus.Status{Node: node, Disabled: true} }
	}
	return px.Status
}
