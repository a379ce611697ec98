// Package server is `nodekit server` as a library: the control plane of one cluster in one process —
// the embedded (or an external) etcd, the API server, the scheduler and the controller manager, and the
// cluster add-ons it installs (controlplane/addons: coredns) — with
// its settings in one typed Config (defaults defined once, in DefaultConfig), its data-dir layout in
// Paths, the argv that starts it in Args and the process itself in Run. cmd/nodekit binds its flags
// to a Config (BindFlags) and calls Run; cluster/ (up, lab) builds a Config and starts Args.
//
// This is the k3s shape (pkg/daemons/config, pkg/daemons/control) with nodekit's own components.
package server

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/controllers/certificates"
	"github.com/nodekit/nodekit/controlplane/controllers/nodelifecycle"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/internal/podnet"
)

// CommandName is the nodekit subcommand that runs a server (`nodekit server`).
const CommandName = "server"

// The server's defaults, as its flags show them. Each is the owning component's own default.
const (
	// DefaultBindAddress and DefaultSecurePort: where the API server serves HTTPS.
	DefaultBindAddress = apiserver.DefaultBindAddress
	DefaultSecurePort  = apiserver.DefaultPort
	// DefaultServiceCIDR is the ClusterIP range; DefaultNodePortRange the NodePort range ("first-last").
	DefaultServiceCIDR   = apiserver.DefaultServiceCIDR
	DefaultNodePortRange = apiserver.DefaultNodePortRange
	// DefaultNotReadyTolerationSeconds: how long new pods tolerate not-ready/unreachable nodes.
	DefaultNotReadyTolerationSeconds = apiserver.DefaultDefaultTolerationSeconds
	// DefaultEtcdClientAddr is the embedded etcd's client address (loopback only).
	DefaultEtcdClientAddr = etcd.DefaultClientAddr
	// DefaultClusterCIDR is the pod network nodes' podCIDRs are cut from, each DefaultNodeCIDRMaskSize long.
	DefaultClusterCIDR      = podnet.DefaultClusterCIDR
	DefaultNodeCIDRMaskSize = controllers.DefaultNodeCIDRMaskSize
	// DefaultNodeMonitorGracePeriod and DefaultNodeMonitorPeriod: node health (the node lifecycle controller).
	DefaultNodeMonitorGracePeriod = nodelifecycle.DefaultGracePeriod
	DefaultNodeMonitorPeriod      = nodelifecycle.DefaultMonitorPeriod
	// DefaultClusterSigningDuration is the longest lifetime of the certificates csrsigning issues.
	DefaultClusterSigningDuration = certificates.DefaultSigningDuration
)

// Config is every setting of one server. The component options are the components' own; Run fills
// the fields that follow from the others (the apiserver's PKI and kubeconfig paths and etcd endpoints,
// etcd's data dir, the controllers' cluster signer). Zero values take the defaults of DefaultConfig.
type Config struct {
	// DataDir holds the server's state (see Paths). Required. It is nodekit's global --data-dir, so
	// BindFlags does not bind it and Args does not spell it.
	DataDir string
	// APIServer: bind and advertise addresses, port, SANs, Service and NodePort ranges, static tokens,
	// the not-ready toleration.
	APIServer apiserver.Options
	// Etcd: the embedded member's client address, or external servers and their TLS files.
	Etcd etcd.Config
	// Controllers: which run, the cluster CIDR and node mask, node monitoring, certificate signing.
	Controllers controllers.Options
	// Scheduler: the scheduler's options (no flags; its defaults).
	Scheduler scheduler.Options
	// Addons: which add-ons are disabled (--disable). Run reconciles them once the API server is
	// ready, with the API server's ServiceCIDR.
	Addons addons.Options
	// Executable, when set, is the nodekit binary the scheduler and the controller manager run from as
	// child processes of the server (`<Executable> <Args()> --run-component=<name>`, each with its own
	// log file Paths().LogFile(name), restarted with back-off when it exits; `nodekit server` sets it).
	// Empty: they run as goroutines of Run's process (in-process callers: tests, benchmarks).
	Executable string
	// LogFile is the file this process's own log lines go to (`nodekit server` writes
	// Paths().LogFile("kube-apiserver") besides stderr); the etcd and kube-apiserver component records
	// name it, so `kubectl logs` of their mirror pods reads it. Empty: their records name no log file.
	LogFile string
	// Ready, when set, is called once, as soon as the API server answers /readyz with ok (cmd/nodekit
	// sends systemd's READY=1 from it).
	Ready func()
}

// DefaultConfig is the server with every default filled in (dataDir given): what `nodekit server`
// runs with no flags.
func DefaultConfig(dataDir string) Config {
	return Config{
		DataDir: dataDir,
		APIServer: apiserver.Options{BindAddress: DefaultBindAddress, Port: DefaultSecurePort, ServiceCIDR: DefaultServiceCIDR,
			NodePortRange: DefaultNodePortRange, DefaultTolerationSeconds: DefaultNotReadyTolerationSeconds},
		Etcd: etcd.Config{ClientAddr: DefaultEtcdClientAddr},
		Controllers: controllers.Options{ClusterCIDR: DefaultClusterCIDR, NodeCIDRMaskSize: DefaultNodeCIDRMaskSize,
			NodeMonitorGracePeriod: DefaultNodeMonitorGracePeriod, NodeMonitorPeriod: DefaultNodeMonitorPeriod,
			ClusterSigningDuration: DefaultClusterSigningDuration},
	}
}

// WithDefaults returns c with every zero setting DefaultConfig gives a value to set to that value.
func (c Config) WithDefaults() Config {
	d := DefaultConfig(c.DataDir)
	set(&c.APIServer.BindAddress, d.APIServer.BindAddress)
	set(&c.APIServer.Port, d.APIServer.Port)
	set(&c.APIServer.ServiceCIDR, d.APIServer.ServiceCIDR)
	set(&c.APIServer.NodePortRange, d.APIServer.NodePortRange)
	set(&c.APIServer.DefaultTolerationSeconds, d.APIServer.DefaultTolerationSeconds)
	set(&c.Etcd.ClientAddr, d.Etcd.ClientAddr)
	set(&c.Controllers.ClusterCIDR, d.Controllers.ClusterCIDR)
	set(&c.Controllers.NodeCIDRMaskSize, d.Controllers.NodeCIDRMaskSize)
	set(&c.Controllers.NodeMonitorGracePeriod, d.Controllers.NodeMonitorGracePeriod)
	set(&c.Controllers.NodeMonitorPeriod, d.Controllers.NodeMonitorPeriod)
	set(&c.Controllers.ClusterSigningDuration, d.Controllers.ClusterSigningDuration)
	return c
}

func set[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Paths is the server's data-dir layout, defined here once.
type Paths struct {
	// DataDir is Config.DataDir.
	DataDir string
	// EtcdDir is the embedded etcd member's data (<DataDir>/etcd).
	EtcdDir string
	// PKIDir holds the cluster CA and the server's certificates (<DataDir>/pki).
	PKIDir string
	// CACert is the cluster CA certificate, PEM (<PKIDir>/ca.crt): what joining nodes pin.
	CACert string
	// AdminKubeconfig is the cluster-admin kubeconfig the API server writes (<DataDir>/admin.kubeconfig).
	AdminKubeconfig string
	// SchedulerKubeconfig and ControllerManagerKubeconfig are the scheduler's and the controller
	// manager's own identities (system:kube-scheduler, system:kube-controller-manager), which the API
	// server writes (<DataDir>/scheduler.kubeconfig, <DataDir>/controller-manager.kubeconfig).
	SchedulerKubeconfig, ControllerManagerKubeconfig string
	// Components holds the component process records (internal/components) the co-located kubelet
	// publishes as mirror pods in kube-system (<DataDir>/components).
	Components string
	// Logs holds the components' log files (<DataDir>/logs; see LogFile).
	Logs string
}

// LogFile is the log file of component name (internal/components' names): <Logs>/<name>.log.
func (p Paths) LogFile(name string) string { return filepath.Join(p.Logs, name+".log") }

// Paths returns c's data-dir layout.
func (c Config) Paths() Paths {
	pkiDir := filepath.Join(c.DataDir, "pki")
	return Paths{
		DataDir:                     c.DataDir,
		EtcdDir:                     filepath.Join(c.DataDir, "etcd"),
		PKIDir:                      pkiDir,
		CACert:                      pki.CertPath(pkiDir, pki.CAName),
		AdminKubeconfig:             filepath.Join(c.DataDir, "admin.kubeconfig"),
		SchedulerKubeconfig:         filepath.Join(c.DataDir, "scheduler.kubeconfig"),
		ControllerManagerKubeconfig: filepath.Join(c.DataDir, "controller-manager.kubeconfig"),
		Components:                  filepath.Join(c.DataDir, "components"),
		Logs:                        filepath.Join(c.DataDir, "logs"),
	}
}

// Validate checks the settings Run would otherwise discover only after starting etcd: the API server's
// port (1-65535), the disabled add-ons' names, the service and cluster CIDRs, the NodePort range ("first-last" within 1-65535, first
// <= last) and the node CIDR mask size (longer than the cluster CIDR's, at most 30 for IPv4). Errors name
// the flag. Zero values are taken as their defaults first (WithDefaults).
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Addons.Validate(); err != nil {
		return err
	}
	if p := c.APIServer.Port; p < 1 || p > 65535 {
		return fmt.Errorf("--secure-port: %d is not in 1-65535", p)
	}
	if _, _, err := net.ParseCIDR(c.APIServer.ServiceCIDR); err != nil {
		return fmt.Errorf("--service-cluster-ip-range: %w", err)
	}
	if c.Addons.Enabled(addons.CoreDNS) {
		if _, err := addons.DNSServiceIP(c.APIServer.ServiceCIDR); err != nil {
			return fmt.Errorf("--service-cluster-ip-range: %w (or --disable %s)", err, addons.CoreDNS)
		}
	}
	_, cluster, err := net.ParseCIDR(c.Controllers.ClusterCIDR)
	if err != nil {
		return fmt.Errorf("--cluster-cidr: %w", err)
	}
	if ones, bits := cluster.Mask.Size(); c.Controllers.NodeCIDRMaskSize <= ones || c.Controllers.NodeCIDRMaskSize > bits-2 {
		return fmt.Errorf("--node-cidr-mask-size: %d must be longer than --cluster-cidr's /%d and at most /%d", c.Controllers.NodeCIDRMaskSize, ones, bits-2)
	}
	first, last, ok := strings.Cut(c.APIServer.NodePortRange, "-")
	lo, err1 := strconv.Atoi(first)
	hi, err2 := strconv.Atoi(last)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return fmt.Errorf("--service-node-port-range: %q is not first-last within 1-65535", c.APIServer.NodePortRange)
	}
	return nil
}
