package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
)

// TestSnapshotSaveRestore saves a snapshot of a real embedded member, restores it into a fresh data dir
// and reads the live keys back (deleted and overwritten keys included correctly).
func TestSnapshotSaveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Config{DataDir: filepath.Join(dir, "etcd"), PKIDir: filepath.Join(dir, "pki"), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < 50; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/default/p%02d", i), fmt.Sprintf(`{"v":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, "/registry/pods/default/p00", `{"v":"new"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "/registry/pods/default/p49"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snap.db")
	if n, err := Save(ctx, s, snap); err != nil || n == 0 {
		t.Fatalf("save: %d %v", n, err)
	}
	restored := filepath.Join(dir, "restored")
	n, err := Restore(ctx, snap, restored)
	if err != nil || n != 49 {
		t.Fatalf("restore: %d keys, %v", n, err)
	}
	if _, err := Restore(ctx, snap, restored); err == nil {
		t.Fatal("restore into a non-empty data dir must fail")
	}
	r, err := Start(ctx, Config{DataDir: restored, PKIDir: filepath.Join(dir, "pki"), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc, err := r.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	resp, err := rc.Get(ctx, "/registry/pods/default/p00")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != `{"v":"new"}` {
		t.Fatalf("p00 after restore: %v %v", err, resp)
	}
	resp, err = rc.Get(ctx, "/registry/pods/default/p49")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("deleted key came back: %v %v", err, resp.Kvs)
	}
	resp, err = rc.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 49 {
		t.Fatalf("restored count: %v %d", err, resp.Count)
	}
}

// TestMemberRequiresClientCertificates: the embedded member answers only TLS clients with a certificate
// of its own etcd CA. A client without a certificate, one with a certificate of another CA (the cluster
// CA's kind), and plain HTTP are all refused; the Store's own files work.
func TestMemberRequiresClientCertificates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, "pki")
	s, err := Start(ctx, Config{DataDir: filepath.Join(dir, "etcd"), PKIDir: pkiDir, ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Endpoints) != 1 || !strings.HasPrefix(s.Endpoints[0], "https://127.0.0.1:") {
		t.Fatalf("endpoints = %v, want one https://127.0.0.1:<port>", s.Endpoints)
	}
	caFile, certFile, keyFile := ClientFiles(pkiDir)
	if s.CAFile != caFile || s.CertFile != certFile || s.KeyFile != keyFile {
		t.Fatalf("store TLS files = %q %q %q, want %q %q %q", s.CAFile, s.CertFile, s.KeyFile, caFile, certFile, keyFile)
	}
	for _, f := range []string{keyFile, filepath.Join(pkiDir, CADir, "ca.key"), filepath.Join(pkiDir, CADir, "server.key")} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v mode %v, want 0600", f, err, fi)
		}
	}
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/registry/x", "1"); err != nil {
		t.Fatalf("client with the API server's certificate: %v", err)
	}

	other, err := pki.LoadOrCreateCA(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.LoadOrIssue(filepath.Join(dir, "other"), "admin", pki.AdminSpec()); err != nil {
		t.Fatal(err)
	}
	refused := map[string]*Store{
		"no certificate":     {Endpoints: s.Endpoints, CAFile: caFile},
		"another CA's admin": {Endpoints: s.Endpoints, CAFile: caFile, CertFile: pki.CertPath(filepath.Join(dir, "other"), "admin"), KeyFile: pki.KeyPath(filepath.Join(dir, "other"), "admin")},
		"plain HTTP, no TLS": {Endpoints: []string{strings.Replace(s.Endpoints[0], "https://", "http://", 1)}},
	}
	for name, st := range refused {
		c, err := st.Client()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = c.Get(rctx, "/registry/x")
		rcancel()
		c.Close()
		if err == nil {
			t.Errorf("%s: read /registry/x, want refused", name)
		}
	}
	// Plain HTTP on the client port gets no etcd answer.
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get(strings.Replace(s.Endpoints[0], "https://", "http://", 1) + "/health")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "health") {
			t.Errorf("plain HTTP /health answered %d %q", resp.StatusCode, body)
		}
	}
	// Neither does TLS without a client certificate.
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	if resp, err := hc.Get(s.Endpoints[0] + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("TLS without a client certificate: /health answered %d", resp.StatusCode)
	}
}
