// Package servingcert obtains the kubelet's serving certificate from the cluster CA through a
// kubernetes.io/kubelet-serving CertificateSigningRequest, as upstream's kubelet does with
// serverTLSBootstrap: subject CN=system:node:<name>, O=system:nodes, the node's host names and IPs as
// subjectAltNames, usages digital signature and server auth. The signed pair is kept in
// <dir>/kubelet-server-current.pem (certificate and key, mode 0600) and reused while it is valid for
// the same names for more than a fifth of its lifetime.
package servingcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	kcert "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// FileName is the certificate-and-key file below the kubelet's certificate directory (upstream's name).
const FileName = "kubelet-server-current.pem"

// Config says for which node and names the certificate is requested.
type Config struct {
	// Client is the kubelet's API client (node credentials).
	Client kubernetes.Interface
	// NodeName is the node's name; the subject is CN=system:node:<NodeName>, O=system:nodes.
	NodeName string
	// DNSNames and IPs are the subjectAltNames (the addresses the Node reports; the approver checks
	// them against status.addresses). At least one is required.
	DNSNames []string
	IPs      []net.IP
	// Dir holds FileName.
	Dir string
	Log *slog.Logger
}

// Obtain returns the serving certificate: the stored one when still good, otherwise a new key and a
// CSR, waiting (until ctx ends) for it to be approved and signed. The error names the step that failed.
func Obtain(ctx context.Context, c Config) (tls.Certificate, error) {
	if c.Client == nil || c.NodeName == "" || c.Dir == "" || len(c.DNSNames)+len(c.IPs) == 0 {
		return tls.Certificate{}, errors.New("servingcert: Client, NodeName, Dir and at least one DNS name or IP are required")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	path := filepath.Join(c.Dir, FileName)
	if pair, err := tls.LoadX509KeyPair(path, path); err == nil && fresh(pair, c, time.Now()) {
		return pair, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	subject := &pkix.Name{CommonName: "system:node:" + c.NodeName, Organization: []string{"system:nodes"}}
	csrPEM, err := kcert.MakeCSR(key, subject, c.DNSNames, c.IPs)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("servingcert: %w", err)
	}
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	sum := sha256.Sum256(der)
	name := "csr-serving-" + hex.EncodeToString(sum[:10])
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	reqName, uid, err := csr.RequestCertificateWithContext(ctx, c.Client, csrPEM, name, certificatesv1.KubeletServingSignerName, nil, usages, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("servingcert: submit certificate signing request: %w", err)
	}
	c.Log.Info("certificate signing request submitted", "csr", reqName, "signer", certificatesv1.KubeletServingSignerName, "node", c.NodeName)
	certPEM, err := csr.WaitForCertificate(ctx, c.Client, reqName, uid)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("servingcert: certificate signing request %s: %w", reqName, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("servingcert: issued certificate: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return tls.Certificate{}, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return tls.Certificate{}, err
	}
	c.Log.Info("kubelet serving certificate issued", "csr", reqName, "node", c.NodeName, "notAfter", pair.Leaf.NotAfter)
	return pair, nil
}

// fresh reports whether pair is for c's names and valid at now for more than a fifth of its lifetime.
func fresh(pair tls.Certificate, c Config, now time.Time) bool {
	leaf := pair.Leaf
	if leaf == nil {
		return false
	}
	left := leaf.NotAfter.Sub(now)
	if now.Before(leaf.NotBefore) || left < leaf.NotAfter.Sub(leaf.NotBefore)/5 {
		return false
	}
	if !slices.Equal(leaf.DNSNames, c.DNSNames) || len(leaf.IPAddresses) != len(c.IPs) {
		return false
	}
	for i, ip := range leaf.IPAddresses {
		if !ip.Equal(c.IPs[i]) {
			return false
		}
	}
	return leaf.Subject.CommonName == "system:node:"+c.NodeName
}
