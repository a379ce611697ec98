// Package server is the kubelet's HTTPS API on :10250, the endpoints the API server and monitoring use
// (upstream pkg/kubelet/server): /healthz, /pods, /containerLogs, /exec, /attach, /portForward (proxied to
// the CRI streaming server), /stats/summary (from CRI stats, in k8s.io/kubelet's stats/v1alpha1 types),
// /metrics (Prometheus), with EnableProfiling /debug/pprof/ (Go's profiles), and nodekit's /serviceproxy
// (internal/proxystatus: what the node's service proxy programmed) when the agent gives it.
//
// Authentication and authorization are upstream's kubelet's (pkg/kubelet/server/auth.go): a client
// certificate verified against the client CA (the cluster CA; CN and O become user and groups) or a
// bearer token the API server vouches for with a TokenReview (Webhook: upstream's webhook mode, cached);
// a request with neither gets 401 Unauthorized (anonymous authentication disabled). Each request is then
// authorized as verb (get, create, update, patch, delete by HTTP method) on the node's subresource
// (nodes/proxy, nodes/stats, nodes/metrics, nodes/log, nodes/healthz, nodes/pods; for the last two
// nodes/proxy is accepted as well, as upstream's fine-grained kubelet authorization) — with Webhook, by a
// SubjectAccessReview, cached for a short time.
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
	"net/http/pprof"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/util/cert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/proxystatus"
	"github.com/nodekit/nodekit/kubelet/cgroups"
	"github.com/nodekit/nodekit/kubelet/metrics"
)

// PodSource gives the pods the kubelet runs; *kubelet.Kubelet satisfies it.
type PodSource interface {
	Pods() []*v1.Pod
	GetPodByName(namespace, name string) (*v1.Pod, bool)
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
	// Certificate, when set, is asked for the serving certificate at each handshake (the kubelet-serving
	// certificate manager's Current); while it returns nil, the certificate above is served.
	Certificate func() *tls.Certificate
	NodeName    string
	NodeIPs     []net.IP
	// ClientCA verifies client certificates (the cluster CA; authentication.x509.clientCAFile).
	ClientCA *x509.CertPool
	// Authenticator authenticates requests (Webhook builds upstream's: client certificates and
	// TokenReview). Nil: client certificates against ClientCA only.
	Authenticator authenticator.Request
	// Authorizer decides each request's attributes (Webhook builds upstream's SubjectAccessReview
	// authorizer). Nil allows every authenticated user (upstream's AlwaysAllow mode).
	Authorizer authorizer.Authorizer

	Pods    PodSource
	Runtime runtimeapi.RuntimeServiceClient
	// Images (optional) gives the image filesystem stats in /stats/summary.
	Images runtimeapi.ImageServiceClient
	// PodCgroupStats (optional) reads a pod's cgroup usage (*kubelet.Kubelet.PodCgroupStats): the pod's
	// CPU time and memory in /stats/summary then come from its cgroup, as upstream's from cadvisor,
	// rather than from the sum over its running containers. ok false: the sum is used.
	PodCgroupStats func(uid types.UID) (s cgroups.Stats, ok bool)
	// RootDir is the kubelet root dir whose filesystem is node.fs in /stats/summary.
	RootDir string
	// Metrics is served on /metrics. Nil: a fresh metrics.New(NodeName, Runtime).
	Metrics *metrics.Metrics
	// EnableProfiling serves Go's pprof profiles on /debug/pprof/ (KubeletConfiguration
	// enableProfilingHandler), authorized as nodes/proxy like upstream's /debug paths.
	EnableProfiling bool
	// ProxyStatus, when set, is served as JSON on proxystatus.Path (authorized as nodes/proxy): what the
	// node's service proxy has programmed. Nil: that path answers 404, as on an upstream kubelet.
	ProxyStatus func() proxystatus.Status
	// ProcessLogs, when set, names the log file of the pods that are component processes rather than
	// containers (kubelet/processpods.Pods.LogFile: only from the node's trusted component records):
	// /containerLogs of such a pod reads that file. Nil: every pod's logs come from the runtime.
	ProcessLogs func(namespace, pod, container string) (path string, ok bool)
	Logger      *slog.Logger
}

// Server is the kubelet server. Create it with New and run it with Serve.
type Server struct {
	cfg      Config
	log      *slog.Logger
	tls      *tls.Config
	cert     *tls.Certificate // the file's or self-signed serving certificate
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
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), cert: &pair}
	s.tls = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.serving,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      cfg.ClientCA,
		NextProtos:     []string{"http/1.1"}, // streaming upgrades (SPDY, websockets) need HTTP/1.1
	}
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port)))
	if s.listener, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("kubelet server: listen %s: %w", addr, err)
	}
	if cfg.Authenticator == nil {
		s.cfg.Authenticator = x509request.New(x509.VerifyOptions{Roots: cfg.ClientCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
			x509request.CommonNameUserConversion)
	}
	s.handler = s.routes()
	return s, nil
}

// serving is the certificate of a new connection: Config.Certificate's when it has one, else the file's
// or the self-signed one. Open connections keep theirs.
func (s *Server) serving(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if s.cfg.Certificate != nil {
		if c := s.cfg.Certificate(); c != nil {
			return c, nil
		}
	}
	return s.cert, nil
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
// as (upstream's kubelet auth: /stats → stats, /metrics → metrics, /healthz → healthz, /pods → pods,
// /containerLogs, /exec, /attach, /portForward → proxy).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, subresource string, h http.HandlerFunc) {
		mux.Handle(pattern, s.authorize(subresource, h))
	}
	handle("GET /healthz", "healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	handle("GET /pods", "pods", s.pods)
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
	if s.cfg.ProxyStatus != nil {
		handle("GET "+proxystatus.Path, "proxy", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s.cfg.ProxyStatus())
		})
	}
	handle("GET /metrics", "metrics", promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP)
	if s.cfg.EnableProfiling {
		handle("GET /debug/pprof/", "proxy", pprof.Index) // heap, goroutine, allocs, ... by name
		handle("GET /debug/pprof/cmdline", "proxy", pprof.Cmdline)
		handle("GET /debug/pprof/profile", "proxy", pprof.Profile)
		handle("GET /debug/pprof/symbol", "proxy", pprof.Symbol)
		handle("GET /debug/pprof/trace", "proxy", pprof.Trace)
	}
	return s.authenticate(mux)
}

// authenticate rejects requests the Authenticator does not authenticate with 401 and puts the user on
// the request's context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := s.cfg.Authenticator.AuthenticateRequest(r)
		if err != nil || !ok || resp == nil || resp.User == nil {
			if err != nil {
				s.log.Debug("kubelet server: unable to authenticate the request", "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(genericapirequest.WithUser(r.Context(), resp.User)))
	})
}

// methodVerbs maps HTTP methods to authorization verbs, as upstream's kubelet does.
var methodVerbs = map[string]string{http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create",
	http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}

// authorize asks the Authorizer, if any, whether the user may do the request's verb on
// nodes/<subresource> of this node (also nodes/proxy for healthz and pods, which it covers upstream).
func (s *Server) authorize(subresource string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Authorizer == nil {
			next.ServeHTTP(w, r)
			return
		}
		u, _ := genericapirequest.UserFrom(r.Context())
		verb, ok := methodVerbs[r.Method]
		if !ok {
			verb = strings.ToLower(r.Method)
		}
		subs := []string{subresource}
		if subresource == "healthz" || subresource == "pods" {
			subs = append(subs, "proxy")
		}
		var reason string
		for _, sub := range subs {
			d, why, err := s.cfg.Authorizer.Authorize(r.Context(), authorizer.AttributesRecord{User: u, Verb: verb, APIVersion: "v1",
				Resource: "nodes", Subresource: sub, Name: s.cfg.NodeName, ResourceRequest: true, Path: r.URL.Path})
			if err != nil {
				s.log.Warn("kubelet server: authorization error", "user", u.GetName(), "verb", verb, "subresource", sub, "err", err)
				http.Error(w, "authorization error: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if d == authorizer.DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
			reason = why
		}
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.GetName(), verb, subs)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
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
