package bootstrap

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kcert "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/nodekit/nodekit/internal/certutil"
)

// These tests use a stand-in API server (httptest over TLS) serving the four requests of the join —
// cluster-info, CSR create, list and watch — to check the join's protocol and its refusals. The real
// join against nodekit's control plane is TestLabJoin in test/e2e/up.

const goodToken = "abcdef.0123456789abcdef"

type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kcert.NewSelfSignedCACert(kcert.Config{CommonName: cn}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}
}

func (ca *testCA) sign(t *testing.T, tmpl *x509.Certificate, pub crypto.PublicKey) []byte {
	t.Helper()
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// fakeAPI is the stand-in API server. It records every request's Authorization header by path.
type fakeAPI struct {
	t         *testing.T
	ca        *testCA // signs CSRs and the serving certificate
	published []byte  // CA PEM published in cluster-info
	approve   bool
	unsigned  bool // cluster-info carries no JWS for goodToken
	denyToken bool // the token is refused (401) although cluster-info is signed with it
	// forbidden is how many cluster-info reads are refused (403) before it is served, as by a server
	// still reconciling the anonymous grant; -1 refuses them all.
	forbidden int

	mu   sync.Mutex
	auth []string // "<method> <path> <Authorization>"
	csr  *certificatesv1.CertificateSigningRequest
}

func (f *fakeAPI) start() *httptest.Server {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	servPEM := f.ca.sign(f.t, &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, key.Public())
	keyDER, _ := x509.MarshalECPrivateKey(key)
	pair, err := tls.X509KeyPair(servPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	f.t.Cleanup(srv.Close)
	return srv
}

// refuseClusterInfo reports whether this cluster-info read is refused, counting down forbidden.
func (f *fakeAPI) refuseClusterInfo() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forbidden == 0 {
		return false
	}
	if f.forbidden > 0 {
		f.forbidden--
	}
	return true
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth = append(f.auth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	switch {
	case r.URL.Path == "/api/v1/namespaces/kube-public/configmaps/cluster-info" && f.refuseClusterInfo():
		writeJSON(w, 403, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure",
			Reason: metav1.StatusReasonForbidden, Code: 403,
			Message: `configmaps "cluster-info" is forbidden: User "system:anonymous" cannot get resource "configmaps" in API group "" in the namespace "kube-public"`})
	case r.URL.Path == "/api/v1/namespaces/kube-public/configmaps/cluster-info":
		kc := clientcmdapi.NewConfig()
		kc.Clusters[""] = &clientcmdapi.Cluster{Server: "https://" + r.Host, CertificateAuthorityData: f.published}
		data, _ := clientcmd.Write(*kc)
		cm := map[string]string{bootstrapapi.KubeConfigKey: string(data)}
		if !f.unsigned {
			id, secret, _ := strings.Cut(goodToken, ".")
			sig, err := jws.ComputeDetachedSignature(string(data), id, secret)
			if err != nil {
				f.t.Error(err)
			}
			cm[bootstrapapi.JWSSignatureKeyPrefix+id] = sig
		}
		writeJSON(w, 200, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic}, Data: cm})
	case r.Header.Get("Authorization") != "Bearer "+goodToken || f.denyToken:
		writeJSON(w, 401, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonUnauthorized, Code: 401, Message: "Unauthorized"})
	case r.Method == http.MethodPost && r.URL.Path == csrPath:
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil) // protobuf or JSON
		c, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			f.t.Errorf("CSR create: %v (%T)", err, obj)
			writeJSON(w, 400, &metav1.Status{Status: "Failure", Code: 400})
			return
		}
		c.UID, c.ResourceVersion = types.UID("uid-1"), "1"
		f.mu.Lock()
		f.csr = c
		f.mu.Unlock()
		writeJSON(w, 201, c)
	case r.Method == http.MethodGet && r.URL.Path == csrPath && r.URL.Query().Get("watch") == "true":
		// A watch-list (sendInitialEvents): the current object, the end-of-initial-events bookmark, then
		// nothing more.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		enc := json.NewEncoder(w)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": f.current()})
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": &certificatesv1.CertificateSigningRequest{
				TypeMeta:   metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	case r.Method == http.MethodGet && r.URL.Path == csrPath:
		writeJSON(w, 200, &certificatesv1.CertificateSigningRequestList{TypeMeta: metav1.TypeMeta{Kind: "CertificateSigningRequestList", APIVersion: "certificates.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "2"}, Items: []certificatesv1.CertificateSigningRequest{*f.current()}})
	default:
		writeJSON(w, 404, &metav1.Status{Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	}
}

// current is the submitted CSR as the API shows it: approved and signed by the CA when f.approve.
func (f *fakeAPI) current() *certificatesv1.CertificateSigningRequest {
	f.mu.Lock()
	c := f.csr.DeepCopy()
	f.mu.Unlock()
	c.TypeMeta = metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"}
	c.ResourceVersion = "2"
	if f.approve {
		block, _ := pem.Decode(c.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			f.t.Error(err)
			return c
		}
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		c.Status.Certificate = f.ca.sign(f.t, &x509.Certificate{Subject: req.Subject, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, req.PublicKey)
	}
	return c
}

func joinCfg(t *testing.T, server string, ca *testCA) Config {
	return Config{Server: server, Token: goodToken, CAHash: certutil.CAHash(ca.cert), NodeName: "node-a",
		Kubeconfig: filepath.Join(t.TempDir(), "kubelet.kubeconfig"), DiscoveryTimeout: 5 * time.Second, CertificateTimeout: 3 * time.Second}
}

// TestJoin: discovery pins the CA, the CSR carries the node's identity, signer and usages, and the node
// kubeconfig (mode 0600) holds the signed certificate, our key and the CA; a second Join is a no-op.
func TestJoin(t *testing.T) {
	ca := newCA(t, "nodekit-ca")
	other := newCA(t, "other-ca")
	f := &fakeAPI{t: t, ca: ca, published: append(append([]byte(nil), other.pem...), ca.pem...), approve: true}
	srv := f.start()
	cfg := joinCfg(t, srv.URL, ca)
	if err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if !strings.HasSuffix(reqs[0], "/cluster-info ") {
		t.Errorf("first request %q: want anonymous cluster-info", reqs[0])
	}
	c := f.csr
	if c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(c.Name, "node-csr-") {
		t.Errorf("CSR %s signer %q", c.Name, c.Spec.SignerName)
	}
	want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	if len(c.Spec.Usages) != 3 || c.Spec.Usages[0] != want[0] || c.Spec.Usages[1] != want[1] || c.Spec.Usages[2] != want[2] {
		t.Errorf("usages %v, want %v", c.Spec.Usages, want)
	}
	fi, err := os.Stat(cfg.Kubeconfig)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v %v", err, fi)
	}
	kc, err := clientcmd.LoadFromFile(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || ctx.AuthInfo != "system:node:node-a" || kc.Clusters[ctx.Cluster].Server != srv.URL {
		t.Fatalf("kubeconfig context %+v", ctx)
	}
	if !bytes.Equal(kc.Clusters[ctx.Cluster].CertificateAuthorityData, ca.pem) {
		t.Errorf("kubeconfig trusts %s, want only the pinned CA", kc.Clusters[ctx.Cluster].CertificateAuthorityData)
	}
	pair, err := tls.X509KeyPair(kc.AuthInfos[ctx.AuthInfo].ClientCertificateData, kc.AuthInfos[ctx.AuthInfo].ClientKeyData)
	if err != nil {
		t.Fatalf("client cert and key do not pair: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if leaf.Subject.CommonName != "system:node:node-a" || leaf.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v", leaf.Subject)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key %T, want ECDSA", pair.PrivateKey)
	}

	// Restart: the valid kubeconfig is kept, the server is not asked again.
	n := len(f.requests())
	before, _ := os.ReadFile(cfg.Kubeconfig)
	if err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(cfg.Kubeconfig)
	if len(f.requests()) != n || !bytes.Equal(before, after) {
		t.Errorf("second Join contacted the server (%d → %d requests) or rewrote the kubeconfig", n, len(f.requests()))
	}
}

// TestJoinIntoCertDir: with a CertDir, the issued pair is the client certificate store's current
// file (kubelet-client-current.pem, a symlink to the timestamped pair, as upstream's kubelet) and the
// kubeconfig names it; a restart keeps it.
func TestJoinIntoCertDir(t *testing.T) {
	ca := newCA(t, "nodekit-ca")
	f := &fakeAPI{t: t, ca: ca, published: ca.pem, approve: true}
	srv := f.start()
	cfg := joinCfg(t, srv.URL, ca)
	cfg.CertDir = filepath.Join(t.TempDir(), "pki")
	if err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(cfg.CertDir, "kubelet-client-current.pem")
	if target, err := os.Readlink(current); err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Fatalf("%s: want a symlink to the timestamped pair: %q %v", current, target, err)
	}
	kc, err := clientcmd.LoadFromFile(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ai := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if ai.ClientCertificate != current || ai.ClientKey != current || len(ai.ClientCertificateData) != 0 {
		t.Fatalf("kubeconfig user %+v: want client-certificate and client-key %s", ai, current)
	}
	pair, err := tls.LoadX509KeyPair(current, current)
	if err != nil || pair.Leaf.Subject.CommonName != "system:node:node-a" {
		t.Fatalf("stored pair: %v %v", err, pair.Leaf)
	}
	n := len(f.requests())
	if err := Join(context.Background(), cfg); err != nil || len(f.requests()) != n {
		t.Errorf("second Join: %v, %d → %d requests (want none)", err, n, len(f.requests()))
	}
}

// TestJoinRefusesWrongCA: a CA that does not match --ca-hash is refused and the token is never sent.
func TestJoinRefusesWrongCA(t *testing.T) {
	ca, impostor := newCA(t, "nodekit-ca"), newCA(t, "impostor")
	f := &fakeAPI{t: t, ca: impostor, published: impostor.pem, approve: true}
	srv := f.start()
	cfg := joinCfg(t, srv.URL, ca)
	err := Join(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "--ca-hash "+certutil.CAHash(ca.cert)+" does not match") || !strings.Contains(err.Error(), certutil.CAHash(impostor.cert)) {
		t.Fatalf("err = %v, want a --ca-hash mismatch naming both hashes", err)
	}
	for _, r := range f.requests() {
		if strings.Contains(r, "Bearer") || !strings.HasSuffix(r, "/cluster-info ") {
			t.Errorf("request %q after a CA mismatch", r)
		}
	}
	if _, err := os.Stat(cfg.Kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig written: %v", err)
	}
}

// TestJoinErrors: each failure names its flag and reason, and writes nothing.
func TestJoinErrors(t *testing.T) {
	ca := newCA(t, "nodekit-ca")
	f := &fakeAPI{t: t, ca: ca, published: ca.pem}
	srv := f.start()
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"malformed token", func(c *Config) { c.Token = "abcdef" }, "--token: not a bootstrap token"},
		{"uppercase token", func(c *Config) { c.Token = "ABCDEF.0123456789abcdef" }, "--token: not a bootstrap token"},
		{"hash without prefix", func(c *Config) { c.CAHash = strings.TrimPrefix(c.CAHash, "sha256:") }, "--ca-hash: "},
		{"short hash", func(c *Config) { c.CAHash = "sha256:abcd" }, "64 hex digits"},
		{"http server", func(c *Config) { c.Server = strings.Replace(c.Server, "https", "http", 1) }, "--server: "},
		{"unreachable", func(c *Config) { c.Server, c.DiscoveryTimeout = closedURL, 3*time.Second }, "--server " + closedURL + ": unreachable for 3s"},
		{"wrong secret", func(c *Config) { c.Token = "abcdef.ffffffffffffffff" }, `--token: the server's cluster-info signature for token id "abcdef" does not verify`},
		{"unknown id", func(c *Config) { c.Token, c.DiscoveryTimeout = "zzzzzz.0123456789abcdef", 3*time.Second }, `--token: kube-public/cluster-info carries no signature for token id "zzzzzz" after 3s`},
		{"not approved", func(c *Config) { c.CertificateTimeout = 2 * time.Second }, "was not approved within 2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := joinCfg(t, srv.URL, ca)
			c.edit(&cfg)
			err := Join(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "ffffffffffffffff") {
				t.Errorf("error leaks the token secret: %v", err)
			}
			if _, err := os.Stat(cfg.Kubeconfig); !os.IsNotExist(err) {
				t.Errorf("kubeconfig written: %v", err)
			}
		})
	}
}

// TestJoinWhileServerBootstraps: cluster-info refused (403) while the server still reconciles its RBAC
// grants is retried, and the join completes once it is served; a server that never publishes it is named
// at DiscoveryTimeout, and nothing is written.
func TestJoinWhileServerBootstraps(t *testing.T) {
	ca := newCA(t, "nodekit-ca")
	f := &fakeAPI{t: t, ca: ca, published: ca.pem, approve: true, forbidden: 2}
	cfg := joinCfg(t, f.start().URL, ca)
	if err := Join(context.Background(), cfg); err != nil {
		t.Fatalf("join with cluster-info refused twice first: %v", err)
	}
	n := 0
	for _, r := range f.requests() {
		if strings.Contains(r, "/cluster-info ") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("cluster-info read %d times, want 3 (two refused, then served)", n)
	}
	if _, err := os.Stat(cfg.Kubeconfig); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}

	never := &fakeAPI{t: t, ca: ca, published: ca.pem, approve: true, forbidden: -1}
	cfg = joinCfg(t, never.start().URL, ca)
	cfg.DiscoveryTimeout = 3 * time.Second
	err := Join(context.Background(), cfg)
	want := "the server does not publish kube-public/cluster-info to anonymous clients"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(for 3s)") {
		t.Fatalf("err = %v, want %q after 3s", err, want)
	}
	if _, err := os.Stat(cfg.Kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig written: %v", err)
	}
}

// TestJoinTokenRejected: a token that signs cluster-info but that the server refuses (401) is named.
func TestJoinTokenRejected(t *testing.T) {
	ca := newCA(t, "nodekit-ca")
	f := &fakeAPI{t: t, ca: ca, published: ca.pem, denyToken: true}
	cfg := joinCfg(t, f.start().URL, ca)
	if err := Join(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "--token: token rejected by the server") {
		t.Fatalf("err = %v, want the token named as rejected", err)
	}
	if _, err := os.Stat(cfg.Kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig written: %v", err)
	}
}

// TestCAHashMatchesKubeadmRecipe: CAHash equals kubeadm's documented openssl pipeline for the
// discovery-token-ca-cert-hash (public key → DER → sha256).
func TestCAHashMatchesKubeadmRecipe(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	ca := newCA(t, "nodekit-ca")
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "openssl x509 -pubkey -in "+path+" | openssl pkey -pubin -outform der | openssl dgst -sha256 -hex | sed 's/^.* //'").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := certutil.CAHash(ca.cert), "sha256:"+strings.TrimSpace(string(out)); got != want {
		t.Errorf("CAHash = %s, openssl says %s", got, want)
	}
}
