// Package etcd runs the control plane's key-value store: an embedded single-member etcd by default, or a
// connection description for an external cluster. Only the API server talks to it. The embedded member
// serves clients and its peer port on loopback with mutual TLS only, from an etcd CA of its own (tls.go).
package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// DefaultClientAddr is the embedded member's client address when Config.ClientAddr is empty.
const DefaultClientAddr = "127.0.0.1:2379"

// Config describes where the store lives. Either DataDir (embedded) or Servers (external) is used.
type Config struct {
	// DataDir is the embedded member's data directory (for example <data-dir>/etcd). Created 0700.
	DataDir string
	// PKIDir is the server's PKI directory (for example <data-dir>/pki), required for the embedded
	// member: its etcd CA, serving and peer certificates (PKIDir/etcd/) and the API server's client
	// certificate (PKIDir/apiserver-etcd-client.*) are loaded from there or created on first start.
	PKIDir string
	// ClientAddr is the host:port the embedded member serves clients on (TLS with client certificates
	// required); "127.0.0.1:0" picks a free loopback port, "" means 127.0.0.1:2379. Only loopback
	// addresses are served.
	ClientAddr string
	// Servers lists external etcd client URLs (https://host:2379). When set no member is embedded.
	Servers []string
	// CAFile, CertFile and KeyFile are the TLS client credentials for external servers (all optional).
	CAFile, CertFile, KeyFile string
}

// Store is a running (or external) etcd as the API server sees it: client endpoints plus TLS files.
type Store struct {
	// Endpoints are the client URLs (https://127.0.0.1:port for the embedded member).
	Endpoints []string
	// CAFile, CertFile, KeyFile are the client TLS files: the etcd CA and the API server's client pair
	// (ClientFiles) for the embedded member, the configured ones for external servers.
	CAFile, CertFile, KeyFile string

	member *embed.Etcd
}

// Start starts the embedded member, or for external servers only records their endpoints. It returns once
// the member is ready to serve (or ctx is done). Errors name the data dir or the address at fault.
func Start(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Servers) > 0 {
		return &Store{Endpoints: cfg.Servers, CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}, nil
	}
	if cfg.DataDir == "" {
		return nil, errors.New("etcd: DataDir is required for the embedded member")
	}
	if cfg.PKIDir == "" {
		return nil, errors.New("etcd: PKIDir is required for the embedded member (it serves only with mutual TLS)")
	}
	addr := cfg.ClientAddr
	if addr == "" {
		addr = DefaultClientAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("etcd: client address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("etcd: client address %q: the embedded member serves only on loopback", addr)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: data dir: %w", err)
	}
	clientURL, peerURL, err := pickURLs(addr)
	if err != nil {
		return nil, err
	}
	clientTLS, peerTLS, err := memberTLS(cfg.PKIDir, host)
	if err != nil {
		return nil, err
	}
	ec := embed.NewConfig()
	ec.Name = "nodekit"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	// Clients and the (single, loopback) peer listener need a certificate of the etcd CA. The peer port
	// carries no traffic with one member, but etcd always opens it; TLS keeps it closed to others too.
	ec.ClientTLSInfo, ec.PeerTLSInfo = clientTLS, peerTLS
	ec.ListenMetricsUrls = nil
	// The API server's watch cache relies on progress notifications for consistent reads from cache.
	ec.WatchProgressNotifyInterval = 5 * time.Second
	// etcd's warnings and errors go to the server log (through slog); its routine info does not.
	ec.LogLevel = DefaultLogLevel.String()
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(Logger(slog.Default(), DefaultLogLevel))
	// Member-level state changes on restart (peer URL) are expected for a single member.
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "member")); err == nil {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	m, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcd: start embedded member in %s: %w", cfg.DataDir, err)
	}
	select {
	case <-m.Server.ReadyNotify():
	case err := <-m.Err():
		m.Close()
		return nil, fmt.Errorf("etcd: embedded member failed: %w", err)
	case <-time.After(time.Minute):
		m.Close()
		return nil, errors.New("etcd: embedded member not ready after 1m")
	case <-ctx.Done():
		m.Close()
		return nil, ctx.Err()
	}
	ep := m.Clients[0].Addr().String()
	slog.Info("embedded etcd ready", "dataDir", cfg.DataDir, "endpoint", "https://"+ep)
	caFile, certFile, keyFile := ClientFiles(cfg.PKIDir)
	return &Store{Endpoints: []string{"https://" + ep}, CAFile: caFile, CertFile: certFile, KeyFile: keyFile, member: m}, nil
}

// pickURLs turns the client address into a client URL and a loopback peer URL on a free port. Port 0 is
// resolved here because etcd advertises the URLs it is given.
func pickURLs(addr string) (client, peer *url.URL, err error) {
	host, port, _ := net.SplitHostPort(addr)
	if port == "0" {
		p, err := freePort(host)
		if err != nil {
			return nil, nil, err
		}
		port = p
	}
	pp, err := freePort(host)
	if err != nil {
		return nil, nil, err
	}
	client = &url.URL{Scheme: "https", Host: net.JoinHostPort(host, port)}
	peer = &url.URL{Scheme: "https", Host: net.JoinHostPort(host, pp)}
	return client, peer, nil
}

func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("etcd: pick a free port on %s: %w", host, err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p, nil
}

// Client returns a new etcd v3 client for the store's endpoints; the caller closes it.
func (s *Store) Client() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: s.Endpoints, DialTimeout: 5 * time.Second, Logger: Logger(slog.Default(), DefaultLogLevel)}
	if s.CertFile != "" || s.CAFile != "" {
		tlsCfg, err := transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd: client TLS: %w", err)
		}
		cfg.TLS = tlsCfg
	}
	return clientv3.New(cfg)
}

// Close stops the embedded member (no-op for external stores). It waits for the member to shut down.
func (s *Store) Close() {
	if s.member != nil {
		s.member.Close()
		s.member = nil
	}
}
