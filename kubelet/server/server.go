// Package server is the kubelet's HTTPS API on :10250, the endpoints the API server and monitoring use
// (upstream pkg/kubelet/server): /healthz, /pods, /containerLogs, /exec, /attach, /portForward (proxied to
// the CRI streaming server), /stats/summary (from CRI stats, in k8s.io/kubelet's stats/v1alpha1 types)
// and /metrics (Prometheus).
//
// Authentication is by client certificate only: the TLS handshake asks for one and verifies it against
// the client CA (the cluster CA); a request without a verified certificate gets 401 Unauthorized, as
// upstream's kubelet with anonymous authentication disabled. The certificate's CN and O become the user
// and groups, and Authorizer (optional) decides per request like upstream's nodes/<subresource> checks.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubelet/metrics"
)

// PodSource gives the pods the kubelet runs; *kubelet.Kubelet satisfies it.
type PodSource interface {
	Pods() []*v1.Pod
	GetPodByName(namespace, name string) (*v1.Pod, bool)
}

// User is the authenticated client: the certificate's subject CN and O.
type User struct {
	Name   string
	Groups []string
}

// Authorizer decides whether user may do verb on the node subresource (upstream's kubelet maps paths to
// nodes/proxy, nodes/log, nodes/stats, nodes/metrics, nodes/healthz). A nil Authorizer allows every
// authenticated user.
type Authorizer interface {
	Authorize(ctx context.Context, user User, verb, subresource string) (allowed bool, reason string, err error)
}

// Config configures a Server. Pods, Runtime and ClientCA are required.
type Config struct {
	// Address and Port to listen on (KubeletConfiguration address/port; Port 0 picks a free port).
	Address string
	Port    int32
	// TLSCertFile and TLSKeyFile are the serving certificate. Empty: a self-signed certificate for
	// NodeName and NodeIPs is created once in CertDir (kubelet.crt/kubelet.key) and reused, as upstream
	// does under <root-dir>/pki.
	TLSCertFile, TLSKeyFile string
	CertDir                 string
	NodeName                string
	NodeIPs                 []net.IP
	// ClientCA verifies client certificates (the cluster CA; authentication.x509.clientCAFile).
	ClientCA *x509.CertPool
	// Authorizer is optional (see Authorizer).
	Authorizer Authorizer

	Pods    PodSource
	Runtime runtimeapi.RuntimeServiceClient
	// Images (optional) gives the image filesystem stats in /stats/summary.
	Images runtimeapi.ImageServiceClient
	// RootDir is the kubelet root dir whose filesystem is node.fs in /stats/summary.
	RootDir string
	// Metrics is served on /metrics. Nil: a fresh metrics.New(NodeName, Runtime).
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Server is the kubelet server. Create it with New and run it with Serve.
type Server struct {
	cfg      Config
	log      *slog.Logger
	tls      *tls.Config
	cert     atomic.Pointer[tls.Certificate] // the serving certificate; SetCertificate replaces it
	listener net.Listener
	handler  http.Handler
	started  time.Time
}

// New validates cfg, loads or creates the serving certificate and binds the listener, so Addr is known
// when it returns. Errors name the field, file or address.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Pods == nil:
		return nil, errors.New("kubelet server: Pods is required")
	case cfg.Runtime == nil:
		return nil, errors.New("kubelet server: Runtime is required")
	case cfg.ClientCA == nil:
		return nil, errors.New("kubelet server: ClientCA is required (client certificates are the only authentication)")
	case cfg.TLSCertFile == "" && cfg.CertDir == "":
		return nil, errors.New("kubelet server: CertDir is required without TLSCertFile/TLSKeyFile")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.NodeName, cfg.Runtime)
	}
	certFile, keyFile := cfg.TLSCertFile, cfg.TLSKeyFile
	if certFile == "" {
		var err error
		if certFile, keyFile, err = selfSignedCert(cfg.CertDir, cfg.NodeName, cfg.NodeIPs); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("kubelet server: serving certificate %s: %w", certFile, err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now()}
	s.cert.Store(&pair)
	s.tls = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      cfg.ClientCA,
		NextProtos:     []string{"http/1.1"}, // streaming upgrades (SPDY, websockets) need HTTP/1.1
	}
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port)))
	if s.listener, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("kubelet server: listen %s: %w", addr, err)
	}
	s.handler = s.routes()
	return s, nil
}

// SetCertificate makes cert the serving certificate of new connections (a kubelet-serving certificate
// issued through a CSR replacing the self-signed one, or its renewal); open connections keep theirs.
func (s *Server) SetCertificate(cert tls.Certificate) {
	s.cert.Store(&cert)
	s.log.Info("kubelet server certificate replaced")
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Handler is the server's authenticated handler (for tests that serve it themselves).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTPS until ctx is cancelled, then shuts down gracefully (5 s for requests in flight;
// follow streams are cut). It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context) error {
	hs := &http.Server{Handler: s.handler, TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(tls.NewListener(s.listener, s.tls)) }()
	s.log.Info("kubelet server listening", "addr", s.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("kubelet server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// routes builds the mux behind authentication; each route names the node subresource it is authorized
// as (upstream's kubelet auth: /stats → stats, /metrics → metrics, /logs & /containerLogs → proxy ...).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, subresource string, h http.HandlerFunc) {
		mux.Handle(pattern, s.authorize(subresource, h))
	}
	handle("GET /healthz", "healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	handle("GET /pods", "proxy", s.pods)
	handle("GET /containerLogs/{namespace}/{pod}/{container}", "proxy", s.containerLogs)
	for _, p := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		handle(p, "proxy", s.exec)
	}
	for _, p := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
		handle(p, "proxy", s.attach)
	}
	for _, p := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		handle(p, "proxy", s.portForward)
	}
	handle("GET /stats/summary", "stats", s.statsSummary)
	handle("GET /metrics", "metrics", promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP)
	return s.authenticate(mux)
}

type userKey struct{}

// authenticate rejects requests without a verified client certificate with 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		leaf := r.TLS.VerifiedChains[0][0]
		u := User{Name: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// authorize asks the Authorizer, if any, with the request's verb (get for GET, create otherwise, as
// upstream maps it) and the node subresource.
func (s *Server) authorize(subresource string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Authorizer != nil {
			u, _ := r.Context().Value(userKey{}).(User)
			verb := "get"
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				verb = "create"
			}
			ok, reason, err := s.cfg.Authorizer.Authorize(r.Context(), u, verb, subresource)
			if err != nil {
				http.Error(w, "authorization error: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if !ok {
				http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s): %s", u.Name, verb, subresource, reason), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// pods writes the kubelet's pods as a v1 PodList, sorted by namespace/name.
func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	pods := s.cfg.Pods.Pods()
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, &list)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("kubelet server: write response", "err", err)
	}
}

// selfSignedCert returns dir/kubelet.crt and dir/kubelet.key, creating a self-signed pair for host and
// ips when they do not exist (client-go's cert.GenerateSelfSignedCertKey, as upstream's kubelet).
func selfSignedCert(dir, host string, ips []net.IP) (string, string, error) {
	certFile, keyFile := filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if ok, err := cert.CanReadCertAndKey(certFile, keyFile); ok && err == nil {
		return certFile, keyFile, nil
	}
	if host == "" {
		host = "localhost"
	}
	crt, key, err := cert.GenerateSelfSignedCertKey(host, ips, nil)
	if err != nil {
		return "", "", fmt.Errorf("kubelet server: self-signed certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("kubelet server: %w", err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return "", "", fmt.Errorf("kubelet server: %w", err)
	}
	if err := os.WriteFile(certFile, crt, 0o644); err != nil {
		return "", "", fmt.Errorf("kubelet server: %w", err)
	}
	return certFile, keyFile, nil
}

// GroupAuthorizer allows users in any of its groups and denies everyone else, for every verb and
// subresource. With the API server's kubelet client in system:masters, GroupAuthorizer{"system:masters"}
// matches what upstream's default RBAC grants through a SubjectAccessReview for nodes/proxy: the API
// server and cluster admins may use the kubelet API, other nodes may not.
type GroupAuthorizer []string

// Authorize implements Authorizer.
func (g GroupAuthorizer) Authorize(_ context.Context, u User, _, _ string) (bool, string, error) {
	for _, have := range u.Groups {
		for _, want := range g {
			if have == want {
				return true, "", nil
			}
		}
	}
	return false, fmt.Sprintf("user %q is in none of the groups %v", u.Name, []string(g)), nil
}
