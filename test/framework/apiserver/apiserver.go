// Package apiserver starts nodekit's real control plane storage and API server inside a test: an
// embedded etcd and the API server on 127.0.0.1 with free ports and temporary directories. Other
// packages' end-to-end tests use it to get a real Kubernetes API (client-go, informers, kubectl).
//
//	s := apiserver.Start(t, apiserver.Options{})
//	pods, _ := s.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
//	kubelet := s.NodeClient(t, "node-a") // acts as system:node:node-a
//
// It also runs the serviceaccount and root-ca-cert-publisher controllers, so every namespace has the
// "default" ServiceAccount and the kube-root-ca.crt ConfigMap that the ServiceAccount admission plugin's
// token volume needs. Everything started is stopped, and the directories removed, by t.Cleanup.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
	nodekitserver "github.com/nodekit/nodekit/server"
)

// Options tune the test server. The zero value is the production defaults.
type Options struct {
	// DefaultTolerationSeconds for not-ready/unreachable NoExecute tolerations added to new pods (0 = 300).
	DefaultTolerationSeconds int64
	// ServiceCIDR (default 10.96.0.0/12) and NodePortRange (default 30000-32767).
	ServiceCIDR, NodePortRange string
	// TokenFile is an optional static token CSV for bearer-token authentication.
	TokenFile string
	// RequestTimeout is the API server's timeout of requests that are not long-running (0 = 60s).
	RequestTimeout time.Duration
	// EncryptionProviderConfig is an EncryptionConfiguration file (--encryption-provider-config).
	EncryptionProviderConfig string
	// AuditPolicyFile and AuditLogPath turn the audit log on (--audit-policy-file, --audit-log-path).
	AuditPolicyFile, AuditLogPath string
	// DisableMetrics turns metrics.k8s.io off (`--disable metrics`).
	DisableMetrics bool
}

// Server is a running test control plane.
type Server struct {
	// Config is an admin (system:masters) client config; copy it before changing it.
	Config *rest.Config
	// Client is an admin clientset.
	Client *kubernetes.Clientset
	// KubeconfigPath is the admin kubeconfig written by the API server (usable by kubectl).
	KubeconfigPath string
	// URL is the API server's https://127.0.0.1:<port>.
	URL string
	// DataDir is the nodekit data dir (pki/, etcd/, admin.kubeconfig).
	DataDir string
	// EtcdEndpoints are the embedded etcd's client URLs (https on loopback, client certificate required).
	EtcdEndpoints []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the etcd CA and a client pair it accepts (etcdctl's
	// --cacert, --cert and --key).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string

	opts Options
	port int
	etcd *etcd.Store

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// EnvStartTimeout names the variable that bounds Start (a Go duration, e.g. "10m"; default 2m). The VM
// leg sets it: under qemu's software emulation, with the installed agent beside the test, etcd and the
// API server take longer than 2 minutes to become ready.
const EnvStartTimeout = "NODEKIT_TEST_START_TIMEOUT"

// StartTimeout is the bound of Start: $NODEKIT_TEST_START_TIMEOUT when it parses as a positive
// duration, 2 minutes otherwise.
func StartTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvStartTimeout)); err == nil && d > 0 {
		return d
	}
	return 2 * time.Minute
}

// Start starts etcd and the API server, waits until /readyz answers ok and the system namespaces
// exist, and registers cleanup; all of it within StartTimeout. It fails the test on any error.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "nodekit-apiserver-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout())
	defer cancel()
	paths := nodekitserver.Config{DataDir: dir}.Paths()
	store, err := etcd.Start(ctx, etcd.Config{DataDir: paths.EtcdDir, PKIDir: paths.PKIDir, ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{DataDir: dir, EtcdEndpoints: store.Endpoints, EtcdCAFile: store.CAFile, EtcdCertFile: store.CertFile,
		EtcdKeyFile: store.KeyFile, opts: opts, port: port, etcd: store}
	t.Cleanup(s.StopAPIServer)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	s.Config = cfg
	s.Client = kubernetes.NewForConfigOrDie(cfg)
	if err := s.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	s.runAccountControllers(t)
	for { // the first pods of a test need both in "default"
		_, err := s.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			_, err = s.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("account controllers: the default ServiceAccount and kube-root-ca.crt of namespace default: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return s
}

// runAccountControllers runs, until the test ends, the two controllers every pod depends on through the
// ServiceAccount admission plugin, as kube-controller-manager would: serviceaccount (the "default"
// ServiceAccount of each namespace) and root-ca-cert-publisher (each namespace's kube-root-ca.crt
// ConfigMap, which the pods' kube-api-access volume projects). Tests that run the whole controller
// manager on the same server run them a second time; both are idempotent.
func (s *Server) runAccountControllers(t testing.TB) {
	t.Helper()
	ca, err := os.ReadFile(nodekitserver.Config{DataDir: s.DataDir}.Paths().CACert)
	if err != nil {
		t.Fatal(err)
	}
	client := s.ControllerManagerClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllers.Run(ctx, client, controllers.Options{Controllers: []string{controllers.ServiceAccount, controllers.RootCAPublisher},
			RootCA: ca, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("account controllers: %v", err)
		}
	})
}

func (s *Server) start() error {
	paths := nodekitserver.Config{DataDir: s.DataDir}.Paths()
	srv, err := server.New(server.Options{
		PKIDir:                      paths.PKIDir,
		AdminKubeconfig:             paths.AdminKubeconfig,
		SchedulerKubeconfig:         paths.SchedulerKubeconfig,
		ControllerManagerKubeconfig: paths.ControllerManagerKubeconfig,
		BindAddress:                 "127.0.0.1",
		Port:                        s.port,
		ServiceCIDR:                 s.opts.ServiceCIDR,
		NodePortRange:               s.opts.NodePortRange,
		TokenFile:                   s.opts.TokenFile,
		DefaultTolerationSeconds:    s.opts.DefaultTolerationSeconds,
		EtcdEndpoints:               s.EtcdEndpoints,
		EtcdCAFile:                  s.EtcdCAFile,
		EtcdCertFile:                s.EtcdCertFile,
		EtcdKeyFile:                 s.EtcdKeyFile,
		ShutdownTimeout:             2 * time.Second,
		RequestTimeout:              s.opts.RequestTimeout,
		EncryptionProviderConfig:    s.opts.EncryptionProviderConfig,
		AuditPolicyFile:             s.opts.AuditPolicyFile,
		AuditLogPath:                s.opts.AuditLogPath,
		DisableMetrics:              s.opts.DisableMetrics,
	})
	if err != nil {
		return err
	}
	s.URL, s.KubeconfigPath = srv.URL, srv.KubeconfigPath
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	return nil
}

// waitReady polls /readyz and the default namespaces.
func (s *Server) waitReady(ctx context.Context) error {
	var last error
	for {
		body, err := s.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			_, err = s.Client.CoreV1().Namespaces().Get(ctx, "kube-node-lease", metav1.GetOptions{})
			if err == nil {
				_, err = s.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			}
			if err == nil {
				return nil
			}
		}
		if err == nil {
			err = fmt.Errorf("readyz: %s", body)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("apiserver not ready: %v", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StopAPIServer stops the API server (etcd keeps running); clients get connection refused until
// Restart. Safe to call twice.
func (s *Server) StopAPIServer() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

// Restart stops the API server if it runs and starts it again on the same URL with the same data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.StopAPIServer()
	var err error
	for i := 0; i < 50; i++ { // the old listener may take a moment to close
		if err = s.start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// NodeConfig returns a client config authenticating as node name (CN=system:node:<name>,
// O=system:nodes), signed by the cluster CA, as a kubelet's would.
func (s *Server) NodeConfig(t testing.TB, name string) *rest.Config {
	t.Helper()
	kp, err := IssueNodeCert(s.DataDir, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg
}

// NodeClient is a clientset over NodeConfig.
func (s *Server) NodeClient(t testing.TB, name string) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(s.NodeConfig(t, name))
}

// NodeKubeconfig writes a kubeconfig for node name into the data dir and returns its path.
func (s *Server) NodeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	kp, err := IssueNodeCert(s.DataDir, name)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(nodekitserver.Config{DataDir: s.DataDir}.Paths().CACert)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.DataDir, "node-"+name+".kubeconfig")
	if err := pki.WriteKubeconfig(path, s.URL, ca, "system:node:"+name, kp); err != nil {
		t.Fatal(err)
	}
	return path
}

// UserConfig returns a client config authenticating as user (CN=user, O=groups), signed by the cluster
// CA: a user RBAC decides for.
func (s *Server) UserConfig(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(nodekitserver.Config{DataDir: s.DataDir}.Paths().PKIDir)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Spec{CommonName: user, Organization: groups, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg
}

// SchedulerClient and ControllerManagerClient are clientsets over the kubeconfigs the API server
// wrote for the scheduler (system:kube-scheduler) and the controller manager
// (system:kube-controller-manager), as the server process runs them.
func (s *Server) SchedulerClient(t testing.TB) *kubernetes.Clientset {
	return s.kubeconfigClient(t, nodekitserver.Config{DataDir: s.DataDir}.Paths().SchedulerKubeconfig)
}

// ControllerManagerClient: see SchedulerClient.
func (s *Server) ControllerManagerClient(t testing.TB) *kubernetes.Clientset {
	return s.kubeconfigClient(t, nodekitserver.Config{DataDir: s.DataDir}.Paths().ControllerManagerKubeconfig)
}

// ControllerManagerConfig is the controller manager's client config (for its metadata client).
func (s *Server) ControllerManagerConfig(t testing.TB) *rest.Config {
	return s.kubeconfig(t, nodekitserver.Config{DataDir: s.DataDir}.Paths().ControllerManagerKubeconfig)
}

func (s *Server) kubeconfigClient(t testing.TB, path string) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(s.kubeconfig(t, path))
}

func (s *Server) kubeconfig(t testing.TB, path string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// Etcd returns an etcd client for the embedded store; it is closed by t.Cleanup.
func (s *Server) Etcd(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// IssueNodeCert signs a node client certificate with the CA under <dataDir>/pki.
func IssueNodeCert(dataDir, node string) (pki.KeyPair, error) {
	if node == "" {
		return pki.KeyPair{}, errors.New("node name is required")
	}
	ca, err := pki.LoadOrCreateCA(nodekitserver.Config{DataDir: dataDir}.Paths().PKIDir)
	if err != nil {
		return pki.KeyPair{}, err
	}
	return ca.Issue(pki.NodeClientSpec(node))
}

// IssueKubeletServingCert signs a kubelet serving certificate for node (CN=system:node:<node>,
// O=system:nodes, server auth, the given IP SANs) with the CA under <dataDir>/pki, as the
// kubelet-serving signer would: the API server verifies kubelets against that CA.
func IssueKubeletServingCert(dataDir, node string, ips ...net.IP) (pki.KeyPair, error) {
	ca, err := pki.LoadOrCreateCA(nodekitserver.Config{DataDir: dataDir}.Paths().PKIDir)
	if err != nil {
		return pki.KeyPair{}, err
	}
	return ca.Issue(pki.Spec{CommonName: pki.NodeUserPrefix + node, Organization: []string{pki.NodesGroup}, IPs: ips, Server: true})
}

// FreePort returns a TCP port free on 127.0.0.1 now (the kernel's pick; another process may take it
// before the caller binds it, which the tests' own listeners make unlikely).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(p)
}
