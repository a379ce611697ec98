package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubelet/eviction"
	"github.com/nodekit/nodekit/kubelet/imagegc"
	"github.com/nodekit/nodekit/kubelet/logs"
	"github.com/nodekit/nodekit/kubelet/metrics"
)

// Defaults for Config fields left zero. They follow the kubelet's flag defaults
// (https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/).
const (
	DefaultPodLogsDir        = "/var/log/pods"
	DefaultClusterDomain     = "cluster.local"
	DefaultResolvConf        = "/etc/resolv.conf"
	DefaultCgroupRoot        = "/"
	DefaultSyncFrequency     = time.Minute
	DefaultRelistPeriod      = time.Second
	DefaultHousekeeping      = 2 * time.Second
	DefaultGCPeriod          = time.Minute
	DefaultBackOff           = 10 * time.Second
	DefaultMaxBackOff        = 5 * time.Minute
	DefaultMaxPerPodDeadCtrs = 1
)

// Config is everything the pod lifecycle half of the kubelet needs. NodeName, Runtime, Images, Client and
// RootDir are required; every other zero field takes the default named on it.
type Config struct {
	// NodeName is the Node this kubelet runs pods for (pods with spec.nodeName == NodeName).
	NodeName string
	// NodeIPs are the node's addresses reported as status.hostIP(s), first the primary. When empty the
	// kubelet reads the Node's InternalIP addresses from the API (registered by the node half).
	NodeIPs []net.IP
	// Runtime and Images are the CRI v1 services (runtime/cri.Client.Runtime() and .Image()).
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Client talks to the API server: pods watch, status subresource, configMaps/secrets/services, events.
	Client kubernetes.Interface
	// Recorder emits pod Events (Pulled, Created, Started, Killing, BackOff, Failed…). Nil: a recorder
	// writing through Client with source component "kubelet", host NodeName.
	Recorder record.EventRecorder

	// RootDir holds per-pod state: <RootDir>/pods/<uid>/volumes/<plugin>/<name> (the kubelet's
	// --root-dir, normally <data-dir>/kubelet).
	RootDir string
	// PodLogsDir is where container logs go: <PodLogsDir>/<ns>_<name>_<uid>/<container>/<restart>.log
	// (default /var/log/pods).
	PodLogsDir string

	// CgroupRoot is the parent of the pod cgroup hierarchy (--cgroup-root, default "/"); pods live under
	// <CgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>.
	CgroupRoot string
	// CgroupDriver is "cgroupfs" (default) or "systemd"; it must match the runtime's.
	CgroupDriver string

	// ClusterDNS are the DNS server IPs given to ClusterFirst pods; ClusterDomain the cluster's DNS domain
	// (default cluster.local); ResolvConf the host resolver file for dnsPolicy Default (default
	// /etc/resolv.conf).
	ClusterDNS    []net.IP
	ClusterDomain string
	ResolvConf    string

	// SyncFrequency is the maximum period between syncs of a running pod (--sync-frequency, default 1m).
	SyncFrequency time.Duration
	// RelistPeriod is the PLEG relist interval (default 1s).
	RelistPeriod time.Duration
	// HousekeepingPeriod is how often pods gone from every source are cleaned up (default 2s).
	HousekeepingPeriod time.Duration
	// GCPeriod is how often dead containers and sandboxes are garbage-collected (default 1m).
	GCPeriod time.Duration
	// NetworkGC (optional) releases the pod network's leftovers (IPs, veths, rules, network namespaces)
	// of every attachment whose sandbox no longer exists: it gets the ID of every sandbox the runtime
	// lists (ready or not), taken while no RunPodSandbox of this kubelet is in flight, so a sandbox
	// being made is never collected. Called at start and every GCPeriod; nil: never.
	NetworkGC func(ctx context.Context, sandboxIDs []string) error
	// AllowedUnsafeSysctls are the sysctls beyond the safe set (kubelet/sysctl.Safe) pods may set on
	// this node: names, or prefixes ending in "*" (upstream's allowedUnsafeSysctls). A pod with any other
	// sysctl is rejected with reason SysctlForbidden.
	AllowedUnsafeSysctls []string
	// MaxPerPodContainer is how many dead instances of each container are kept for lastState (default 1).
	MaxPerPodContainer int

	// ImagePullBackOff and MaxImagePullBackOff bound the image pull back-off (10s doubling to 5m).
	ImagePullBackOff    time.Duration
	MaxImagePullBackOff time.Duration
	// SerializeImagePulls pulls one image at a time (--serialize-image-pulls, default false here).
	SerializeImagePulls bool
	// CrashLoopBackOff and MaxCrashLoopBackOff bound the container restart back-off (10s doubling to
	// 5m, reset after 2×max = 10 min without a restart).
	CrashLoopBackOff    time.Duration
	MaxCrashLoopBackOff time.Duration

	// ProbeManager runs liveness/readiness/startup probes. Nil: no probes are run; a container without a
	// readiness probe is Ready once running and one without a startup probe Started once running, while
	// one with a readiness probe stays not Ready (a probe that never ran means not ready, as upstream).
	ProbeManager ProbeManager

	// Metrics receives kubelet_pod_start_duration_seconds, kubelet_pod_worker_duration_seconds,
	// kubelet_pleg_relist_duration_seconds and kubelet_runtime_operations_* (the CRI calls of the pod
	// path). Nil: nothing is recorded. Share it with the kubelet server, which serves it on /metrics.
	Metrics *metrics.Metrics

	// ContainerLogs is the container log rotation policy (containerLogMaxSize, default 10Mi;
	// containerLogMaxFiles, default 5), checked every ContainerLogMonitorInterval (default 10s).
	ContainerLogs               logs.Policy
	ContainerLogMonitorInterval time.Duration
	// ImageGC is the image garbage collection policy (imageGCHighThresholdPercent 85,
	// imageGCLowThresholdPercent 80, imageMinimumGCAge 2m when all three are zero), run every
	// ImageGCPeriod (default 5m). PinnedImages are never collected (imagegc.Config.PinnedImages: the
	// runtime's pause image and the node's imported images).
	ImageGC       imagegc.Policy
	ImageGCPeriod time.Duration
	PinnedImages  []string
	// EvictionThresholds are evictionHard/evictionSoft parsed (eviction.ParseThresholds); none means no
	// eviction and pressure conditions always False. EvictionPressureTransitionPeriod defaults to 5m,
	// EvictionMaxPodGracePeriod (seconds) bounds soft evictions, EvictionMonitoringInterval defaults to
	// 10s.
	EvictionThresholds               []eviction.Threshold
	EvictionPressureTransitionPeriod time.Duration
	EvictionMaxPodGracePeriod        int64
	EvictionMonitoringInterval       time.Duration

	// Logger receives one line per event (pod=, container=, node= keys). Nil: slog.Default().
	Logger *slog.Logger
}

// withDefaults validates c and returns a copy with the defaults filled in. Errors name the field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("kubelet config: NodeName is required"))
	}
	if c.Runtime == nil {
		errs = append(errs, errors.New("kubelet config: Runtime (CRI RuntimeService) is required"))
	}
	if c.Images == nil {
		errs = append(errs, errors.New("kubelet config: Images (CRI ImageService) is required"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("kubelet config: Client (API clientset) is required"))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("kubelet config: RootDir is required (normally <data-dir>/kubelet)"))
	} else if !filepath.IsAbs(c.RootDir) {
		errs = append(errs, fmt.Errorf("kubelet config: RootDir %q must be an absolute path", c.RootDir))
	}
	switch c.CgroupDriver {
	case "":
		c.CgroupDriver = "cgroupfs"
	case "cgroupfs", "systemd":
	default:
		errs = append(errs, fmt.Errorf("kubelet config: CgroupDriver %q is not cgroupfs or systemd", c.CgroupDriver))
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = DefaultPodLogsDir
	} else if !filepath.IsAbs(c.PodLogsDir) {
		errs = append(errs, fmt.Errorf("kubelet config: PodLogsDir %q must be an absolute path", c.PodLogsDir))
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = DefaultCgroupRoot
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = DefaultClusterDomain
	}
	if c.ResolvConf == "" {
		c.ResolvConf = DefaultResolvConf
	}
	setDur := func(d *time.Duration, def time.Duration, name string) {
		if *d == 0 {
			*d = def
		} else if *d < 0 {
			errs = append(errs, fmt.Errorf("kubelet config: %s %v must be positive", name, *d))
		}
	}
	setDur(&c.SyncFrequency, DefaultSyncFrequency, "SyncFrequency")
	setDur(&c.RelistPeriod, DefaultRelistPeriod, "RelistPeriod")
	setDur(&c.HousekeepingPeriod, DefaultHousekeeping, "HousekeepingPeriod")
	setDur(&c.GCPeriod, DefaultGCPeriod, "GCPeriod")
	setDur(&c.ImagePullBackOff, DefaultBackOff, "ImagePullBackOff")
	setDur(&c.MaxImagePullBackOff, DefaultMaxBackOff, "MaxImagePullBackOff")
	setDur(&c.CrashLoopBackOff, DefaultBackOff, "CrashLoopBackOff")
	setDur(&c.MaxCrashLoopBackOff, DefaultMaxBackOff, "MaxCrashLoopBackOff")
	setDur(&c.ContainerLogMonitorInterval, logs.DefaultMonitorInterval, "ContainerLogMonitorInterval")
	setDur(&c.ImageGCPeriod, imagegc.DefaultPeriod, "ImageGCPeriod")
	setDur(&c.EvictionMonitoringInterval, eviction.DefaultMonitoringInterval, "EvictionMonitoringInterval")
	if c.ContainerLogs == (logs.Policy{}) {
		c.ContainerLogs = logs.Policy{MaxSize: logs.DefaultMaxSize, MaxFiles: logs.DefaultMaxFiles}
	}
	if err := c.ContainerLogs.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("kubelet config: %w", err))
	}
	if c.ImageGC == (imagegc.Policy{}) {
		c.ImageGC = imagegc.Policy{HighThresholdPercent: imagegc.DefaultHighThresholdPercent,
			LowThresholdPercent: imagegc.DefaultLowThresholdPercent, MinAge: imagegc.DefaultMinAge}
	}
	if err := c.ImageGC.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("kubelet config: %w", err))
	}
	if c.MaxPerPodContainer <= 0 {
		c.MaxPerPodContainer = DefaultMaxPerPodDeadCtrs
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, errors.Join(errs...)
}
