// Package server assembles the API server: PKI, authentication, authorization, admission and the
// resource registries on k8s.io/apiserver's generic server, served over HTTPS. It is the wiring only;
// each stage lives in its own package (pki, authn, authz, admission, registry/*).
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/nodekit/nodekit/controlplane/apiserver/crd"
	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/internal/certutil"
)

// Defaults of Options (kube-apiserver's).
const (
	DefaultBindAddress              = "0.0.0.0"
	DefaultPort                     = 6443
	DefaultServiceCIDR              = "10.96.0.0/12"
	DefaultNodePortRange            = "30000-32767"
	DefaultDefaultTolerationSeconds = 300
)

// Options configure the API server. Zero values get the documented defaults.
type Options struct {
	// PKIDir holds the cluster CA and the serving and client certificates (made on first start), and
	// AdminKubeconfig is where the admin (system:masters) kubeconfig is written, mode 0600. Both
	// required; the server's data-dir layout (server.Config.Paths) names them.
	PKIDir, AdminKubeconfig string
	// SchedulerKubeconfig and ControllerManagerKubeconfig are where the scheduler's and the controller
	// manager's kubeconfigs (their own client certificates, mode 0600) are written. Both required.
	SchedulerKubeconfig, ControllerManagerKubeconfig string
	// BindAddress and Port are where HTTPS is served (default 0.0.0.0:6443; Port -1 picks a free port).
	BindAddress string
	Port        int
	// AdvertiseAddress is the address written to the kubeconfig and the `kubernetes` endpoints
	// (default: 127.0.0.1 when bound to loopback, else the first non-loopback host address).
	AdvertiseAddress string
	// ExtraSANs are added to the serving certificate (IPs or DNS names).
	ExtraSANs []string
	// ServiceCIDR is the ClusterIP range (default 10.96.0.0/12); its first address is the `kubernetes` service's.
	ServiceCIDR string
	// NodePortRange is "first-last" (default 30000-32767).
	NodePortRange string
	// TokenFile is an optional static bearer token CSV (token,user,uid,"group1,group2").
	TokenFile string
	// DefaultTolerationSeconds is how long new pods tolerate not-ready/unreachable nodes (default 300).
	DefaultTolerationSeconds int64
	// ShutdownTimeout bounds how long shutdown waits for open requests such as watches (default 60s).
	ShutdownTimeout time.Duration
	// RequestTimeout is how long a request that is not long-running (a watch, a proxy, a pod's log,
	// exec, attach or port-forward stream) may take before it is answered 504 (kube-apiserver's
	// --request-timeout; default 60s).
	RequestTimeout time.Duration
	// EncryptionProviderConfig is an EncryptionConfiguration file (apiserver.config.k8s.io/v1,
	// kube-apiserver's --encryption-provider-config): the resources it lists (secrets, typically) are
	// encrypted in etcd with aescbc, aesgcm or secretbox. "" stores every value as it is.
	EncryptionProviderConfig string
	// AuditPolicyFile is an audit.k8s.io/v1 Policy (kube-apiserver's --audit-policy-file); with
	// AuditLogPath (a file, or "-" for standard output) the events it selects are logged there as JSON
	// lines, rotated after AuditLogMaxSize MB (0: never), kept AuditLogMaxAge days and AuditLogMaxBackup
	// old files (0: no limit). Both "": no audit log.
	AuditPolicyFile, AuditLogPath                      string
	AuditLogMaxAge, AuditLogMaxBackup, AuditLogMaxSize int
	// DisableMetrics turns the resource metrics API (metrics.k8s.io, what `kubectl top` reads) off: it
	// is neither served nor in discovery, and no kubelet is scraped (`nodekit server --disable metrics`).
	DisableMetrics bool
	// MetricResolution is how often the kubelets' /stats/summary are scraped for metrics.k8s.io
	// (default 15s, metrics-server's --metric-resolution); CPU usage is the rate over two scrapes.
	MetricResolution time.Duration
	// EtcdEndpoints and the etcd TLS files locate the store.
	EtcdEndpoints                         []string
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
}

// Server is a configured API server, ready to Run.
type Server struct {
	// URL is https://<advertise address>:<port>.
	URL string
	// KubeconfigPath is the admin kubeconfig (Options.AdminKubeconfig, mode 0600).
	KubeconfigPath string
	// PKIDir is Options.PKIDir.
	PKIDir string
	// CA is the cluster CA (<PKIDir>/ca.crt, ca.key): the controller manager's cluster signer for node
	// certificate requests (controllers.Options.ClusterSigner).
	CA *pki.CA
	// CAHash is the CA's pin for joining agents (certutil.CAHash: "sha256:<hex>").
	CAHash string

	generic *genericapiserver.GenericAPIServer
	crds    *crd.Server
}

func (o *Options) complete() error {
	if o.PKIDir == "" || o.AdminKubeconfig == "" || o.SchedulerKubeconfig == "" || o.ControllerManagerKubeconfig == "" {
		return errors.New("apiserver: PKIDir and the admin, scheduler and controller manager kubeconfig paths are required")
	}
	if o.BindAddress == "" {
		o.BindAddress = DefaultBindAddress
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Port < 0 {
		o.Port = 0
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if o.NodePortRange == "" {
		o.NodePortRange = DefaultNodePortRange
	}
	if o.DefaultTolerationSeconds == 0 {
		o.DefaultTolerationSeconds = DefaultDefaultTolerationSeconds
	}
	if len(o.EtcdEndpoints) == 0 {
		return errors.New("apiserver: EtcdEndpoints is required")
	}
	if o.AdvertiseAddress == "" {
		ip := net.ParseIP(o.BindAddress)
		if ip != nil && ip.IsLoopback() {
			o.AdvertiseAddress = ip.String()
		} else if hostIPs := hostAddresses(); len(hostIPs) > 0 {
			o.AdvertiseAddress = hostIPs[0].String()
		} else {
			o.AdvertiseAddress = "127.0.0.1"
		}
	}
	return nil
}

// hostAddresses lists the host's non-loopback unicast IPv4 addresses (for the serving certificate).
func hostAddresses() []net.IP {
	var ips []net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

func parsePortRange(s string) (base, size int, err error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi > 65535 || hi < lo {
		return 0, 0, fmt.Errorf("apiserver: node port range %q: want first-last within 1-65535", s)
	}
	return lo, hi - lo + 1, nil
}

// New prepares the API server: PKI and admin kubeconfig on first start, the HTTPS listener, the storage
// of every resource and the handler chain. Run serves it.
func New(opts Options) (*Server, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	_, serviceNet, err := net.ParseCIDR(opts.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("apiserver: service CIDR: %w", err)
	}
	npBase, npSize, err := parsePortRange(opts.NodePortRange)
	if err != nil {
		return nil, err
	}
	kubernetesIP := firstIP(serviceNet)

	pkiDir := opts.PKIDir
	certs, err := ensureCerts(pkiDir, opts, kubernetesIP)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("apiserver: listen: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	serverURL := serverURL(opts.AdvertiseAddress, port)
	kubeconfig := opts.AdminKubeconfig
	if err := writeKubeconfigs(opts, serverURL, certs); err != nil {
		ln.Close()
		return nil, err
	}

	gs, crds, err := build(opts, ln, pkiDir, certs, serviceNet, kubernetesIP, npBase, npSize, port)
	if err != nil {
		ln.Close()
		return nil, err
	}
	caHash := certutil.CAHash(certs.ca.Cert)
	slog.Info("apiserver configured", "url", serverURL, "kubeconfig", kubeconfig, "pki", pkiDir, "ca-hash", caHash)
	return &Server{URL: serverURL, KubeconfigPath: kubeconfig, PKIDir: pkiDir, CA: certs.ca, CAHash: caHash, generic: gs, crds: crds}, nil
}

// Run serves until ctx is cancelled, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	prepared := s.generic.PrepareRun()
	if err := s.crds.ShareOpenAPI(s.generic); err != nil {
		return err
	}
	return prepared.RunWithContext(ctx)
}

// AddReadyzChecks adds checks to /readyz (each also served as /readyz/<name>), for the components that
// run beside the API server in one process. Call it before Run.
func (s *Server) AddReadyzChecks(checks ...healthz.HealthChecker) error {
	return s.generic.AddReadyzChecks(checks...)
}

// serverURL is the API server's advertised URL, https://<host>:<port>.
func serverURL(host string, port int) string {
	return (&url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}).String()
}

func firstIP(n *net.IPNet) net.IP {
	ip := make(net.IP, len(n.IP))
	copy(ip, n.IP)
	for i := len(ip) - 1; i >= 0; i-- {
		ip[i]++
		if ip[i] != 0 {
			break
		}
	}
	return ip
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
