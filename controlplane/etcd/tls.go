package etcd

import (
	"fmt"
	"net"
	"path/filepath"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
)

// Certificates of the embedded member, in the server's PKI directory, laid out as kubeadm's: an etcd
// CA of its own (etcd/ca), apart from the cluster CA, so a certificate the cluster CA issues (a node's,
// a user's) never opens etcd.
const (
	// CADir is the etcd CA's directory inside the PKI directory.
	CADir = "etcd"
	// ServerName, PeerName are the member's serving and peer pairs in CADir.
	ServerName = "server"
	PeerName   = "peer"
	// ClientName is the API server's client pair (CN kube-apiserver-etcd-client) in the PKI directory.
	ClientName = "apiserver-etcd-client"
	// ClientCN is the client certificate's subject CN.
	ClientCN = "kube-apiserver-etcd-client"
)

// ClientFiles are the paths of the etcd CA and of the API server's etcd client certificate and key in
// pkiDir: what a client of the embedded member (the API server, `nodekit etcd-snapshot`, etcdctl's
// --cacert, --cert and --key) presents.
func ClientFiles(pkiDir string) (caFile, certFile, keyFile string) {
	return pki.CertPath(filepath.Join(pkiDir, CADir), pki.CAName), pki.CertPath(pkiDir, ClientName), pki.KeyPath(pkiDir, ClientName)
}

// memberTLS loads or creates the etcd CA in pkiDir/etcd and the member's server and peer certificates
// (SANs localhost, 127.0.0.1, ::1 and host) and the API server's client certificate, and returns the
// member's client and peer TLS settings: client and peer certificates required, signed by the etcd CA.
func memberTLS(pkiDir, host string) (client, peer transport.TLSInfo, err error) {
	caDir := filepath.Join(pkiDir, CADir)
	ca, err := pki.LoadOrCreateNamedCA(caDir, "etcd-ca")
	if err != nil {
		return client, peer, fmt.Errorf("etcd: CA in %s: %w", caDir, err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(host); ip != nil && !ip.Equal(ips[0]) && !ip.Equal(ips[1]) {
		ips = append(ips, ip)
	}
	// Both pairs are for serving and for clients, as kubeadm's: peers authenticate each other both ways,
	// and etcd's gRPC gateway dials the member's own client port with the serving pair.
	spec := pki.Spec{CommonName: "nodekit-etcd", DNSNames: []string{"localhost"}, IPs: ips, Server: true, Client: true}
	if _, err := ca.LoadOrIssue(caDir, ServerName, spec); err != nil {
		return client, peer, fmt.Errorf("etcd: server certificate: %w", err)
	}
	if _, err := ca.LoadOrIssue(caDir, PeerName, spec); err != nil {
		return client, peer, fmt.Errorf("etcd: peer certificate: %w", err)
	}
	if _, err := ca.LoadOrIssue(pkiDir, ClientName, pki.Spec{CommonName: ClientCN, Client: true}); err != nil {
		return client, peer, fmt.Errorf("etcd: client certificate: %w", err)
	}
	caFile := pki.CertPath(caDir, pki.CAName)
	client = transport.TLSInfo{CertFile: pki.CertPath(caDir, ServerName), KeyFile: pki.KeyPath(caDir, ServerName),
		TrustedCAFile: caFile, ClientCertAuth: true}
	peer = transport.TLSInfo{CertFile: pki.CertPath(caDir, PeerName), KeyFile: pki.KeyPath(caDir, PeerName),
		TrustedCAFile: caFile, ClientCertAuth: true}
	return client, peer, nil
}
