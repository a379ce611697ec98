// Package testpki is a throwaway certificate authority for tests of the kubelet server: it issues the
// client certificates the server authenticates (CN = user, O = groups).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// CA is an in-memory ECDSA P-256 CA valid for an hour around now.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// Pool holds the CA certificate, for server.Config.ClientCA.
	Pool *x509.CertPool
}

// New creates a CA; it fails t on error.
func New(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "testpki-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	return ca
}

// Issue returns a PEM client certificate and key for user cn in groups, valid for an hour; it fails t
// on error.
func (ca *CA) Issue(t testing.TB, cn string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.IssueUntil(t, time.Now().Add(time.Hour), cn, groups...)
}

// IssueUntil is Issue for a certificate that expires at notAfter (and has a serial of its own).
func (ca *CA) IssueUntil(t testing.TB, notAfter time.Time, cn string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// Client returns an HTTPS client presenting a certificate for cn/groups that does not verify the
// server (the kubelet's serving certificate is self-signed).
func (ca *CA) Client(t testing.TB, cn string, groups ...string) (*tls.Config, []byte, []byte) {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn, groups...)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}, certPEM, keyPEM
}
