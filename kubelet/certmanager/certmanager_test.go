package certmanager

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"

	"github.com/nodekit/nodekit/kubelet/server/testpki"
)

// fakeManager is a certificate.Manager whose current certificate the test sets.
type fakeManager struct {
	cur atomic.Pointer[tls.Certificate]
}

func (m *fakeManager) Start()                    {}
func (m *fakeManager) Stop()                     {}
func (m *fakeManager) ServerHealthy() bool       { return true }
func (m *fakeManager) Current() *tls.Certificate { return m.cur.Load() }
func (m *fakeManager) set(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil {
		m.cur.Store(&pair)
	}
	return err
}

// TestTransportSwitchesLiveConnections: a client built on Transport presents the manager's current
// certificate; when it changes, the kept-alive HTTP/2 connection is closed and the next request
// carries the new certificate.
func TestTransportSwitchesLiveConnections(t *testing.T) {
	ca := testpki.New(t)
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	m := &fakeManager{}
	if err := m.set(ca.Issue(t, "system:node:old")); err != nil {
		t.Fatal(err)
	}
	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: serverCA}}
	stop, err := Transport(rc, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	client := &http.Client{Transport: rc.Transport}
	get := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return string(b[:n])
	}
	if got := get(); got != "system:node:old" {
		t.Fatalf("first request authenticated as %q", got)
	}
	if got := get(); got != "system:node:old" || len(conns) != 1 {
		t.Fatalf("second request: %q on %d connections, want the kept-alive one", got, len(conns))
	}
	if err := m.set(ca.Issue(t, "system:node:new")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * WatchPeriod)
	for got := get(); got != "system:node:new"; got = get() {
		if time.Now().After(deadline) {
			t.Fatalf("still authenticated as %q %s after the rotation", got, 10*WatchPeriod)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(conns) != 2 {
		t.Errorf("%d connections, want a new one for the new certificate", len(conns))
	}
}

// TestSeed: an empty store is seeded from the kubeconfig's certificate; a store holding a newer one
// (the rotated) keeps it; a kubeconfig holding a newer one (re-issued by an admin) replaces it.
func TestSeed(t *testing.T) {
	ca := testpki.New(t)
	dir := t.TempDir()
	store, err := certificate.NewFileStore(ClientPrefix, dir, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(certPEM, keyPEM []byte) ClientConfig {
		return ClientConfig{NodeName: "a", Dir: dir, Log: slog.Default(), Kubeconfig: &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: certPEM, KeyData: keyPEM}}}
	}
	stored := func() []byte {
		t.Helper()
		c, err := store.Current()
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Raw
	}
	der := func(certPEM []byte) []byte { b, _ := pem.Decode(certPEM); return b.Bytes }
	c1, k1 := ca.IssueUntil(t, time.Now().Add(time.Hour), "system:node:a", "system:nodes")
	if err := seed(store, cfg(c1, k1)); err != nil || !bytes.Equal(stored(), der(c1)) {
		t.Fatalf("empty store: %v, want the kubeconfig's certificate stored", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "kubelet-client-current.pem")); err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Fatalf("current file is no symlink to the pair: %q %v", target, err)
	}
	c2, k2 := ca.IssueUntil(t, time.Now().Add(2*time.Hour), "system:node:a", "system:nodes")
	if _, err := store.Update(c2, k2); err != nil {
		t.Fatal(err)
	}
	if err := seed(store, cfg(c1, k1)); err != nil || !bytes.Equal(stored(), der(c2)) {
		t.Fatalf("rotated store with the older kubeconfig: %v, want the rotated certificate kept", err)
	}
	c3, k3 := ca.IssueUntil(t, time.Now().Add(3*time.Hour), "system:node:a", "system:nodes")
	if err := seed(store, cfg(c3, k3)); err != nil || !bytes.Equal(stored(), der(c3)) {
		t.Fatalf("newer kubeconfig: %v, want it stored", err)
	}
	if err := seed(store, cfg(nil, nil)); err != nil {
		t.Fatalf("no kubeconfig certificate with a stored one: %v", err)
	}
	empty := t.TempDir()
	es, _ := certificate.NewFileStore(ClientPrefix, empty, empty, "", "")
	if err := seed(es, ClientConfig{Dir: empty, Log: slog.Default(), Kubeconfig: &rest.Config{}}); err == nil {
		t.Fatal("no certificate anywhere: want an error")
	}
}
