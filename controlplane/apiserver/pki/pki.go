// Package pki creates and loads the control plane's certificate authority and the certificates issued
// from it: the API server's serving certificate, the admin client certificate (O=system:masters), the API
// server's kubelet client certificate, the scheduler's and controller manager's client certificates
// (CN=system:kube-scheduler, CN=system:kube-controller-manager) and node client certificates (CN=system:node:<name>,
// O=system:nodes), following the Kubernetes PKI conventions (kubernetes.io/docs/setup/best-practices/certificates).
// Files are PEM, <name>.crt (0644) and <name>.key (0600) in one directory.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File base names inside the PKI directory.
const (
	CAName            = "ca"
	ServingName       = "apiserver"
	AdminName         = "admin"
	KubeletClientName = "apiserver-kubelet-client"
	SchedulerName     = "kube-scheduler"
	ControllersName   = "kube-controller-manager"
)

// Groups and user names the authorizer understands.
const (
	MastersGroup    = "system:masters"
	NodesGroup      = "system:nodes"
	NodeUserPrefix  = "system:node:"
	AdminUser       = "kubernetes-admin"
	KubeletClientCN = "kube-apiserver-kubelet-client"
	// SchedulerUser and ControllerManagerUser are the scheduler's and the controller manager's
	// identities, which the bootstrap RBAC policy binds to system:kube-scheduler and
	// system:kube-controller-manager (and the controllers' roles).
	SchedulerUser         = "system:kube-scheduler"
	ControllerManagerUser = "system:kube-controller-manager"
	caValidity            = 10 * 365 * 24 * time.Hour
	leafValidity          = 365 * 24 * time.Hour
	clockSkewAllowed      = time.Hour
)

// CA is a loaded certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// CertificatePEM returns the CA certificate in PEM: the bundle clients of the API server trust (the
// controller manager publishes it as each namespace's kube-root-ca.crt). Nil for a nil CA.
func (ca *CA) CertificatePEM() []byte {
	if ca == nil {
		return nil
	}
	return ca.CertPEM
}

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// Spec says what certificate to issue. Server and Client select the extended key usages.
type Spec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// NodeClientSpec is the client certificate identity of node name: CN=system:node:<name>, O=system:nodes,
// which the node authorizer and NodeRestriction admission recognise.
func NodeClientSpec(name string) Spec {
	return Spec{CommonName: NodeUserPrefix + name, Organization: []string{NodesGroup}, Client: true}
}

// AdminSpec is the cluster admin's client identity (O=system:masters: every permission).
func AdminSpec() Spec {
	return Spec{CommonName: AdminUser, Organization: []string{MastersGroup}, Client: true}
}

// KubeletClientSpec is the identity the API server presents to kubelets when proxying logs and exec.
func KubeletClientSpec() Spec {
	return Spec{CommonName: KubeletClientCN, Organization: []string{MastersGroup}, Client: true}
}

// UserClientSpec is a client identity with no group but system:authenticated: a user RBAC grants to
// (CN=user).
func UserClientSpec(user string) Spec {
	return Spec{CommonName: user, Client: true}
}

// LoadOrCreateCA loads dir/ca.crt and dir/ca.key or creates them (self-signed, 10 years, ECDSA P-256):
// the cluster CA (CN nodekit-ca).
func LoadOrCreateCA(dir string) (*CA, error) {
	return LoadOrCreateNamedCA(dir, "nodekit-ca")
}

// LoadOrCreateNamedCA is LoadOrCreateCA for a CA of its own (for example etcd's, which signs only the
// etcd member's and its clients' certificates) whose new certificate gets the subject CN commonName.
func LoadOrCreateNamedCA(dir, commonName string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	kp, err := readPair(dir, CAName)
	if err == nil {
		return parseCA(kp)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkewAllowed),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA: %w", err)
	}
	kp = KeyPair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: keyPEM(key)}
	if err := writePair(dir, CAName, kp); err != nil {
		return nil, err
	}
	return parseCA(kp)
}

func parseCA(kp KeyPair) (*CA, error) {
	cert, key, err := ParsePair(kp)
	if err != nil {
		return nil, fmt.Errorf("pki: CA: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("pki: ca.crt is not a CA certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: kp.CertPEM}, nil
}

// Issue signs a new ECDSA P-256 key pair for spec, valid for one year.
func (ca *CA) Issue(spec Spec) (KeyPair, error) {
	if spec.CommonName == "" {
		return KeyPair{}, errors.New("pki: spec.CommonName is required")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:    spec.DNSNames,
		IPAddresses: spec.IPs,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	certPEM, err := ca.sign(tmpl, key.Public(), leafValidity)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: certPEM, KeyPEM: keyPEM(key)}, nil
}

// SignRequest issues a certificate (PEM) for a certificate signing request whose signature the caller
// has verified: the request's subject, DNS/IP/URI/e-mail SANs and public key, the key usages usage and
// ext, valid from an hour ago (clock skew) for ttl, never past the CA's own expiry. This is the signing
// step of a Kubernetes CSR signer (certificates.k8s.io); which requests to sign is the caller's policy.
func (ca *CA) SignRequest(req *x509.CertificateRequest, usage x509.KeyUsage, ext []x509.ExtKeyUsage, ttl time.Duration) ([]byte, error) {
	if ttl <= 0 {
		return nil, errors.New("pki: ttl must be positive")
	}
	tmpl := &x509.Certificate{
		Subject:        req.Subject,
		KeyUsage:       usage,
		ExtKeyUsage:    ext,
		DNSNames:       req.DNSNames,
		IPAddresses:    req.IPAddresses,
		URIs:           req.URIs,
		EmailAddresses: req.EmailAddresses,
	}
	return ca.sign(tmpl, req.PublicKey, ttl)
}

// sign completes tmpl (serial, validity, no CA rights) and signs pub with the CA key. NotBefore is
// backdated for clock skew by clockSkewAllowed, or a tenth of ttl when that is less: a rotating client
// (client-go's certificate manager) renews at 70–90 % of NotBefore..NotAfter, which a backdate longer
// than the lifetime itself would put in the past, renewing again at once.
func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, ttl time.Duration) ([]byte, error) {
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-min(clockSkewAllowed, ttl/10))
	tmpl.NotAfter = now.Add(ttl)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, false
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return pemBlock("CERTIFICATE", der), nil
}

// LoadOrIssue returns dir/<name>.crt+key when they exist, were signed by ca and cover spec's SANs;
// otherwise it issues a new pair for spec and writes it.
func (ca *CA) LoadOrIssue(dir, name string, spec Spec) (KeyPair, error) {
	kp, err := readPair(dir, name)
	if err == nil {
		cert, _, perr := ParsePair(kp)
		if perr == nil && cert.CheckSignatureFrom(ca.Cert) == nil && covers(cert, spec) && time.Until(cert.NotAfter) > 30*24*time.Hour {
			return kp, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return KeyPair{}, err
	}
	kp, err = ca.Issue(spec)
	if err != nil {
		return KeyPair{}, err
	}
	return kp, writePair(dir, name, kp)
}

func covers(cert *x509.Certificate, spec Spec) bool {
	if cert.Subject.CommonName != spec.CommonName || !slices.Equal(cert.Subject.Organization, spec.Organization) {
		return false
	}
	for _, d := range spec.DNSNames {
		if !slices.Contains(cert.DNSNames, d) {
			return false
		}
	}
	for _, ip := range spec.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// ParsePair parses a PEM certificate and its PEM private key (EC, PKCS#8 or PKCS#1).
func ParsePair(kp KeyPair) (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(kp.CertPEM)
	if cb == nil {
		return nil, nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kb, _ := pem.Decode(kp.KeyPEM)
	if kb == nil {
		return nil, nil, errors.New("no PEM key")
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("key is not a signer")
	}
	return cert, signer, nil
}

// CertPath and KeyPath name the files of pair name in dir.
func CertPath(dir, name string) string { return filepath.Join(dir, name+".crt") }

// KeyPath is the private key file of pair name in dir.
func KeyPath(dir, name string) string { return filepath.Join(dir, name+".key") }

func readPair(dir, name string) (KeyPair, error) {
	c, err := os.ReadFile(CertPath(dir, name))
	if err != nil {
		return KeyPair{}, err
	}
	k, err := os.ReadFile(KeyPath(dir, name))
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: c, KeyPEM: k}, nil
}

func writePair(dir, name string, kp KeyPair) error {
	if err := WriteFileAtomic(KeyPath(dir, name), kp.KeyPEM, 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(CertPath(dir, name), kp.CertPEM, 0o644)
}

// WriteFileAtomic writes data to path through a temporary file and rename, with mode perm.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(key)
	return pemBlock("EC PRIVATE KEY", der)
}
