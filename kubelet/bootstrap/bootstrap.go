// Package bootstrap is the node's first join to a cluster: kubeadm-style token discovery of the cluster
// CA, then kubelet TLS bootstrapping of the node's client certificate.
//
// Join follows the standard contract, so a node joins any conformant control plane that issues bootstrap
// tokens (kubeadm's "discovery-token" flow and the kubelet's TLS bootstrapping):
//
//  1. Discovery: GET /api/v1/namespaces/kube-public/configmaps/cluster-info anonymously over TLS that is
//     not yet verified (the CA is not known yet); its "kubeconfig" key holds the cluster's
//     certificate-authority-data.
//  2. Verification: the ConfigMap's jws-kubeconfig-<token id> (a detached JWS the control plane's
//     bootstrap signer computes with the token secret) must verify with our token, and the CA is trusted
//     only if the sha256 of its DER SubjectPublicKeyInfo equals --ca-hash (kubeadm's
//     --discovery-token-ca-cert-hash). The token is never sent before both hold.
//  3. TLS bootstrapping: over TLS verified with that CA, authenticated by the bootstrap token (user
//     system:bootstrap:<id>, group system:bootstrappers), the node submits a CertificateSigningRequest
//     for signer kubernetes.io/kube-apiserver-client-kubelet with subject CN=system:node:<name>,
//     O=system:nodes, and waits for the control plane to approve and sign it.
//  4. The node kubeconfig (server, CA, client certificate and key) is written atomically, mode 0600.
//     With a CertDir, the pair goes to the client certificate store there (kubelet/certmanager's
//     kubelet-client-current.pem, which rotation renews) and the kubeconfig names that file, as
//     upstream's kubelet writes it; otherwise the pair is embedded.
package bootstrap

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kcert "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/nodekit/nodekit/internal/certutil"
	"github.com/nodekit/nodekit/kubelet/certmanager"
)

// NodeUserPrefix and NodesGroup are the node authorizer's identity of a kubelet.
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
)

// Config is what the join needs; the error messages name the nodekit agent flags the fields come from.
type Config struct {
	// Server is the API server URL, https://host:port (--server).
	Server string
	// Token is the bootstrap token "<id>.<secret>" (--token).
	Token string
	// CAHash pins the cluster CA: "sha256:<64 hex digits>" of its DER SubjectPublicKeyInfo (--ca-hash).
	CAHash string
	// NodeName is the node the certificate is for (CN system:node:<NodeName>).
	NodeName string
	// Kubeconfig is the node kubeconfig to write (--kubeconfig).
	Kubeconfig string
	// CertDir, when set, is the kubelet's certificate directory: the issued pair is stored there
	// (certmanager.ClientPrefix) and the kubeconfig refers to its current file.
	CertDir string
	// DiscoveryTimeout bounds the wait for the server to answer discovery (default 2 min);
	// CertificateTimeout bounds the wait for the CSR to be approved and signed (default 2 min).
	DiscoveryTimeout, CertificateTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// caHashRE is the pin format (internal/certutil.CAHashPrefix and 64 hex digits), checked before any
// request so a mistyped --ca-hash is named as such rather than as a mismatch.
var caHashRE = regexp.MustCompile(`^(?i:sha256:[0-9a-f]{64})$`)

func (c *Config) complete() error {
	if !bootstraputil.IsValidBootstrapToken(c.Token) { // the error never echoes the secret
		return fmt.Errorf("--token: not a bootstrap token: want <id>.<secret> with a 6- and a 16-character [a-z0-9] part (%d characters given)", len(c.Token))
	}
	if !caHashRE.MatchString(c.CAHash) {
		return fmt.Errorf("--ca-hash: %q: want sha256: followed by 64 hex digits (the hash 'nodekit token create' prints)", c.CAHash)
	}
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--server: %q: want the API server's https://host:port URL", c.Server)
	}
	if c.NodeName == "" {
		return errors.New("--node-name: empty node name")
	}
	if c.Kubeconfig == "" {
		return errors.New("--kubeconfig: the path to write the node kubeconfig to is required with --token")
	}
	if c.DiscoveryTimeout == 0 {
		c.DiscoveryTimeout = 2 * time.Minute
	}
	if c.CertificateTimeout == 0 {
		c.CertificateTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Join makes c.Kubeconfig a working node kubeconfig. If the file already holds a client certificate
// for this node that is valid now, it does nothing (an agent restart); otherwise it runs discovery,
// verification and TLS bootstrapping (see the package doc) and writes the file. Errors name the flag at
// fault and the reason: a malformed --token or --ca-hash, an unreachable --server, a token the server
// signed no cluster-info for or whose signature does not verify, a CA that does not match --ca-hash, a
// token the server rejects, a CSR not approved or not signed within CertificateTimeout.
func Join(ctx context.Context, c Config) error {
	if err := c.complete(); err != nil {
		return err
	}
	log := c.Logger.With("node", c.NodeName, "server", c.Server)
	if ok, why := validKubeconfig(c.Kubeconfig, c.NodeName, time.Now()); ok {
		log.Info("node kubeconfig present and valid: not joining again", "kubeconfig", c.Kubeconfig)
		return nil
	} else if why != "" {
		log.Info("joining again", "kubeconfig", c.Kubeconfig, "reason", why)
	}
	start := time.Now()
	ca, err := discoverCA(ctx, c, log)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := requestClientCert(ctx, c, ca, log)
	if err != nil {
		return err
	}
	user := &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	if c.CertDir != "" {
		store, err := certificate.NewFileStore(certmanager.ClientPrefix, c.CertDir, c.CertDir, "", "")
		if err == nil {
			_, err = store.Update(certPEM, keyPEM)
		}
		if err != nil {
			return fmt.Errorf("client certificate store %s: %w", c.CertDir, err)
		}
		current := certmanager.CurrentFile(c.CertDir, certmanager.ClientPrefix)
		user = &clientcmdapi.AuthInfo{ClientCertificate: current, ClientKey: current}
	}
	if err := writeKubeconfig(c.Kubeconfig, c.Server, ca.pem, NodeUserPrefix+c.NodeName, user); err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	log.Info("node joined", "kubeconfig", c.Kubeconfig, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// trustedCA is the pinned cluster CA: the certificates of cluster-info whose key matches --ca-hash.
type trustedCA struct {
	certs []*x509.Certificate
	pem   []byte
}

// discoverCA reads cluster-info without verifying the server (no credentials are sent), and returns the
// CA certificates matching the pin. Connection errors are retried until DiscoveryTimeout.
func discoverCA(ctx context.Context, c Config, log *slog.Logger) (*trustedCA, error) {
	anon, err := kubernetes.NewForConfig(&rest.Config{Host: c.Server, Timeout: 10 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	id, secret, _ := strings.Cut(c.Token, ".")
	sigKey := bootstrapapi.JWSSignatureKeyPrefix + id
	var data, sig string
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, c.DiscoveryTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err := anon.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		switch {
		case err == nil && cm.Data[sigKey] == "":
			// The bootstrap signer signs cluster-info for a new token shortly after it is created.
			err = fmt.Errorf("%s/%s carries no signature for token id %q", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, id)
			if lastErr == nil || lastErr.Error() != err.Error() {
				log.Warn("discovery: waiting for the token's signature", "err", err)
			}
			lastErr = err
			return false, nil
		case err == nil:
			data, sig = cm.Data[bootstrapapi.KubeConfigKey], cm.Data[sigKey]
			return true, nil
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
			// A server still bootstrapping answers so until it has published cluster-info and reconciled
			// the anonymous grant to read it (kubeadm's discovery retries these too); one that never
			// does fails with this error at DiscoveryTimeout.
			err = fmt.Errorf("the server does not publish %s/%s to anonymous clients: %v", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
			if lastErr == nil || lastErr.Error() != err.Error() {
				log.Warn("discovery: waiting for the server to publish cluster-info", "err", err)
			}
			lastErr = err
			return false, nil
		default:
			if lastErr == nil || lastErr.Error() != err.Error() {
				log.Warn("discovery: server not answering yet", "err", err)
			}
			lastErr = err
			return false, nil
		}
	})
	if err != nil {
		switch {
		case lastErr != nil && wait.Interrupted(err) && strings.Contains(lastErr.Error(), "no signature for token id"):
			return nil, fmt.Errorf("--token: %v after %s: the token is unknown or expired (or the server runs no bootstrap signer)", lastErr, c.DiscoveryTimeout)
		case lastErr != nil && wait.Interrupted(err) && strings.Contains(lastErr.Error(), "does not publish"):
			return nil, fmt.Errorf("--server %s: %v (for %s)", c.Server, lastErr, c.DiscoveryTimeout)
		case lastErr != nil && wait.Interrupted(err):
			return nil, fmt.Errorf("--server %s: unreachable for %s: %w", c.Server, c.DiscoveryTimeout, lastErr)
		}
		return nil, err
	}
	// The signature proves that whoever serves cluster-info knows the token secret (kubeadm's token
	// discovery); the CA pin below proves it is the cluster we mean.
	if !jws.DetachedTokenIsValid(sig, data, id, secret) {
		return nil, fmt.Errorf("--token: the server's cluster-info signature for token id %q does not verify with this token's secret (mistyped token?): refusing to trust it", id)
	}
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("--server %s: %s/%s key %q is not a kubeconfig: %w", c.Server, metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, bootstrapapi.KubeConfigKey, err)
	}
	var caData []byte
	for _, cl := range cfg.Clusters {
		caData = append(caData, cl.CertificateAuthorityData...)
	}
	certs, err := kcert.ParseCertsPEM(caData)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %s/%s has no usable certificate-authority-data: %w", c.Server, metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
	}
	var seen []string
	ca := &trustedCA{}
	for _, cert := range certs {
		if err := certutil.VerifyCAHash(c.CAHash, cert); err != nil {
			seen = append(seen, certutil.CAHash(cert))
			continue
		}
		ca.certs = append(ca.certs, cert)
	}
	if len(ca.certs) == 0 {
		return nil, fmt.Errorf("--ca-hash %s does not match the cluster CA the server %s presents (%s): refusing to send the token; check --ca-hash and --server",
			c.CAHash, c.Server, strings.Join(seen, ", "))
	}
	if ca.pem, err = kcert.EncodeCertificates(ca.certs...); err != nil {
		return nil, err
	}
	log.Info("discovery: cluster CA pinned", "ca", ca.certs[0].Subject.CommonName, "hash", c.CAHash)
	return ca, nil
}

// requestClientCert generates the node's ECDSA P-256 key, submits its CSR with the bootstrap token and
// waits for the signed certificate; it returns the certificate and key PEM.
func requestClientCert(ctx context.Context, c Config, ca *trustedCA, log *slog.Logger) (certPEM, keyPEM []byte, err error) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: c.Server, BearerToken: c.Token, Timeout: 30 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem}})
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	subject := &pkix.Name{CommonName: NodeUserPrefix + c.NodeName, Organization: []string{NodesGroup}}
	csrPEM, err := kcert.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	name, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, csrName(key.Public()),
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return nil, nil, tokenError(err)
	}
	log.Info("certificate signing request submitted", "csr", name, "signer", certificatesv1.KubeAPIServerClientKubeletSignerName)
	wctx, cancel := context.WithTimeout(ctx, c.CertificateTimeout)
	defer cancel()
	certPEM, err = csr.WaitForCertificate(wctx, client, name, uid)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return nil, nil, notIssued(ctx, client, name, c.CertificateTimeout)
		}
		return nil, nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	if err := checkIssued(certPEM, key.Public(), subject.CommonName, ca); err != nil {
		return nil, nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	return certPEM, keyPEM, err
}

// notIssued says which step a CSR that timed out is stuck at: approval or signing.
func notIssued(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) error {
	const signer = certificatesv1.KubeAPIServerClientKubeletSignerName
	req, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		for _, c := range req.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				return fmt.Errorf("certificate signing request %s was approved but not signed within %s (does the control plane run the %s signer?)", name, timeout, signer)
			}
		}
	}
	return fmt.Errorf("certificate signing request %s was not approved within %s (does the control plane auto-approve %s requests?)", name, timeout, signer)
}

// tokenError names the token when the server refuses it.
func tokenError(err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("--token: token rejected by the server (401 Unauthorized: unknown, expired or mistyped token)")
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--token: the token is valid but may not create certificate signing requests: %w", err)
	}
	return fmt.Errorf("submitting the certificate signing request: %w", err)
}

// csrName names the request after the node's public key ("node-csr-<hash>", as upstream's kubelet does),
// so a retry with the same key finds its own request.
func csrName(pub crypto.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return "node-csr-" + hex.EncodeToString(sum[:12])
}

// checkIssued verifies the signed certificate: our key, the node's name, a client certificate of the
// pinned CA.
func checkIssued(certPEM []byte, pub crypto.PublicKey, cn string, ca *trustedCA) error {
	certs, err := kcert.ParseCertsPEM(certPEM)
	if err != nil {
		return fmt.Errorf("issued certificate: %w", err)
	}
	leaf := certs[0]
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !k.Equal(pub) {
		return errors.New("issued certificate is not for the key the request carried")
	}
	if leaf.Subject.CommonName != cn {
		return fmt.Errorf("issued certificate is for %q, want %q", leaf.Subject.CommonName, cn)
	}
	roots := x509.NewCertPool()
	for _, c := range ca.certs {
		roots.AddCert(c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("issued certificate does not chain to the pinned CA as a client certificate: %w", err)
	}
	return nil
}

// validKubeconfig reports whether path holds a kubeconfig whose current user has a client certificate
// for node that is valid at now; when not, why ("" if the file does not exist).
func validKubeconfig(path, node string, now time.Time) (bool, string) {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, ""
	} else if err != nil {
		return false, err.Error()
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo] == nil || cfg.Clusters[ctx.Cluster] == nil {
		return false, "no current context with a user and a cluster"
	}
	ai := cfg.AuthInfos[ctx.AuthInfo]
	data := ai.ClientCertificateData
	if len(data) == 0 && ai.ClientCertificate != "" {
		if data, err = os.ReadFile(ai.ClientCertificate); err != nil {
			return false, err.Error()
		}
	}
	certs, err := kcert.ParseCertsPEM(data)
	if err != nil {
		return false, "client certificate: " + err.Error()
	}
	leaf := certs[0]
	switch {
	case leaf.Subject.CommonName != NodeUserPrefix+node:
		return false, fmt.Sprintf("client certificate is for %q", leaf.Subject.CommonName)
	case now.Before(leaf.NotBefore) || now.After(leaf.NotAfter):
		return false, fmt.Sprintf("client certificate not valid now (valid %s to %s)", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	return true, ""
}

// writeKubeconfig writes the node kubeconfig (the shape nodekit writes for its nodes: cluster and
// context "nodekit", the user named after the node with credentials ai) atomically with mode 0600.
func writeKubeconfig(path, server string, caPEM []byte, user string, ai *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodekit"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = ai
	cfg.Contexts["nodekit"] = &clientcmdapi.Context{Cluster: "nodekit", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "nodekit"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op once renamed
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600)
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
