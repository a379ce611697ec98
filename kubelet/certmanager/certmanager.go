// Package certmanager keeps the kubelet's two certificates current through CertificateSigningRequests,
// as upstream's kubelet does with rotateCertificates and serverTLSBootstrap, with client-go's
// certificate.Manager (k8s.io/client-go/util/certificate):
//
//   - the node client certificate (signer kubernetes.io/kube-apiserver-client-kubelet, subject
//     CN=system:node:<name>, O=system:nodes, usages digital signature and client auth), stored as
//     <dir>/kubelet-client-<timestamp>.pem with the kubelet-client-current.pem symlink;
//   - the kubelet serving certificate (signer kubernetes.io/kubelet-serving, the same subject, the node's
//     host name and IP as subjectAltNames, usages digital signature and server auth), stored as
//     <dir>/kubelet-server-<timestamp>.pem with the kubelet-server-current.pem symlink.
//
// The manager renews a certificate at a random point between 70 % and 90 % of its lifetime (NotBefore
// to NotAfter), with a new ECDSA P-256 key each time, retrying with backoff while the control plane does
// not answer. Transport makes an API client present the current client certificate and close its
// connections when it changes, so no live connection keeps using the old one.
package certmanager

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
)

// Store pair-name prefixes below the certificate directory (upstream's kubelet names).
const (
	ClientPrefix  = "kubelet-client"
	ServingPrefix = "kubelet-server"
)

// CurrentFile is the symlink to the current pair of prefix below dir: <dir>/<prefix>-current.pem.
func CurrentFile(dir, prefix string) string {
	return filepath.Join(dir, prefix+"-current.pem")
}

// subject is the node's certificate subject, the node authorizer's identity of a kubelet.
func subject(node string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
}

// ClientConfig says whose client certificate is rotated.
type ClientConfig struct {
	// NodeName is the node; the certificate's subject is CN=system:node:<NodeName>, O=system:nodes.
	NodeName string
	// Dir is the certificate directory (the kubelet's <root>/pki).
	Dir string
	// Kubeconfig is the node's client configuration as loaded from its kubeconfig: its client
	// certificate (CertData/KeyData or CertFile/KeyFile) seeds the store when the store holds none, or
	// an older one (one that expires earlier).
	Kubeconfig *rest.Config
	Log        *slog.Logger
}

// Client is the node client certificate's manager and the API client configuration that uses it.
type Client struct {
	certificate.Manager
	// Config is Kubeconfig with Transport: every connection presents the manager's current certificate,
	// and connections are closed when it changes. Build every API client of the node from it.
	Config *rest.Config
	stop   func()
}

// Stop stops the rotation and the transport's watch of the certificate.
func (c *Client) Stop() {
	c.Manager.Stop()
	c.stop()
}

// NewClient returns the (not yet started: call Start) manager of the node client certificate. The error
// names a certificate that cannot be read or parsed, or a store that holds no certificate and none to
// seed it.
func NewClient(c ClientConfig) (*Client, error) {
	if c.NodeName == "" || c.Dir == "" || c.Kubeconfig == nil {
		return nil, errors.New("certmanager: NodeName, Dir and Kubeconfig are required")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	store, err := certificate.NewFileStore(ClientPrefix, c.Dir, c.Dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("certmanager: client certificate store %s: %w", c.Dir, err)
	}
	if err := seed(store, c); err != nil {
		return nil, err
	}
	// The manager requests with the client it rotates: the current certificate authenticates the
	// renewal (the approver's self-node-client rule).
	var client kubernetes.Interface
	m, err := certificate.NewManager(&certificate.Config{
		Name:             "kubelet-client",
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		Template:         &x509.CertificateRequest{Subject: subject(c.NodeName)},
		SignerName:       certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:        certificate.DefaultKubeletClientGetUsages,
		CertificateStore: store,
	})
	if err != nil {
		return nil, fmt.Errorf("certmanager: client certificate: %w", err)
	}
	rc := rest.CopyConfig(c.Kubeconfig)
	stop, err := Transport(rc, m, c.Log)
	if err != nil {
		return nil, err
	}
	if client, err = kubernetes.NewForConfig(rc); err != nil {
		stop()
		return nil, err
	}
	return &Client{Manager: m, Config: rc, stop: stop}, nil
}

// seed stores the kubeconfig's client certificate when the store has none or one expiring earlier.
func seed(store certificate.FileStore, c ClientConfig) error {
	kc := c.Kubeconfig.TLSClientConfig
	certPEM, keyPEM := kc.CertData, kc.KeyData
	var err error
	if len(certPEM) == 0 && kc.CertFile != "" {
		if certPEM, err = os.ReadFile(kc.CertFile); err != nil {
			return fmt.Errorf("certmanager: kubeconfig client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 && kc.KeyFile != "" {
		if keyPEM, err = os.ReadFile(kc.KeyFile); err != nil {
			return fmt.Errorf("certmanager: kubeconfig client key: %w", err)
		}
	}
	cur, curErr := store.Current()
	var noCert *certificate.NoCertKeyError
	if curErr != nil && !errors.As(curErr, &noCert) {
		return fmt.Errorf("certmanager: client certificate store: %w", curErr)
	}
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		if curErr != nil {
			return fmt.Errorf("certmanager: no client certificate in the kubeconfig nor in %s", CurrentFile(c.Dir, ClientPrefix))
		}
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certmanager: kubeconfig client certificate: %w", err)
	}
	if cur != nil && !pair.Leaf.NotAfter.After(cur.Leaf.NotAfter) {
		return nil // the store's (the last rotated) is as new: the kubeconfig's is the one it replaced
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("certmanager: client certificate store: %w", err)
	}
	c.Log.Info("client certificate store seeded from the kubeconfig", "node", c.NodeName, "file", CurrentFile(c.Dir, ClientPrefix),
		"serial", pair.Leaf.SerialNumber.String(), "notAfter", pair.Leaf.NotAfter)
	return nil
}

// ServingConfig says for which node and names the serving certificate is requested.
type ServingConfig struct {
	// Client is the kubelet's API client (node credentials).
	Client kubernetes.Interface
	// NodeName is the node; the subject is CN=system:node:<NodeName>, O=system:nodes.
	NodeName string
	// Names returns the subjectAltNames: the host names and IPs the Node reports in status.addresses
	// (the approver checks them against the Node object), or ok false while the Node is not registered
	// yet (no request is made before).
	Names func() (dnsNames []string, ips []net.IP, ok bool)
	// Dir is the certificate directory (the kubelet's <root>/pki).
	Dir string
}

// NewServing returns the (not yet started) manager of the kubelet serving certificate; Current is nil
// until the first one is issued (or loaded from the store).
func NewServing(c ServingConfig) (certificate.Manager, error) {
	if c.Client == nil || c.NodeName == "" || c.Dir == "" || c.Names == nil {
		return nil, errors.New("certmanager: Client, NodeName, Names and Dir are required")
	}
	store, err := certificate.NewFileStore(ServingPrefix, c.Dir, c.Dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("certmanager: serving certificate store %s: %w", c.Dir, err)
	}
	m, err := certificate.NewManager(&certificate.Config{
		Name:        "kubelet-serving",
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return c.Client, nil },
		GetTemplate: func() *x509.CertificateRequest {
			dns, ips, ok := c.Names()
			if !ok || len(dns)+len(ips) == 0 {
				return nil
			}
			return &x509.CertificateRequest{Subject: subject(c.NodeName), DNSNames: dns, IPAddresses: ips}
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
	})
	if err != nil {
		return nil, fmt.Errorf("certmanager: serving certificate: %w", err)
	}
	return m, nil
}
