package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	apifw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// testSigningDuration is the test cluster's --cluster-signing-duration: every certificate csrsigning
// issues lives this long (the agent does not ask for a lifetime, as upstream's kubelet).
const testSigningDuration = 15 * time.Minute

// expiringNodeKubeconfig writes a node kubeconfig for node whose client certificate (signed by ca) was
// issued 10 minutes ago and expires at notAfter: past the 70–90 % point of its lifetime, so the agent's
// certificate manager renews it at once. It returns the path and the certificate.
func expiringNodeKubeconfig(t *testing.T, api *apifw.Server, ca *pki.CA, node string, notAfter time.Time) (string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: time.Now().Add(-10 * time.Minute), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	kp := pki.KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := pki.WriteKubeconfig(path, api.URL, ca.CertPEM, "system:node:"+node, kp); err != nil {
		t.Fatal(err)
	}
	return path, cert
}

// waitClientRotated waits for the agent's client certificate store (<pki>/kubelet-client-current.pem)
// to hold a certificate other than old, and checks it: issued through a kubernetes.io/kube-apiserver-
// client-kubelet CSR the node itself made, approved by the approver's self-node-client rule, living
// testSigningDuration, chaining to ca. It returns the new certificate.
func waitClientRotated(t *testing.T, admin kubernetes.Interface, pkiDir, node string, old *x509.Certificate, ca *pki.CA) *x509.Certificate {
	t.Helper()
	current := filepath.Join(pkiDir, "kubelet-client-current.pem")
	var cert *x509.Certificate
	waitFor(t, 60*time.Second, "client certificate renewed through a CSR", func() (bool, string) {
		pair, err := tls.LoadX509KeyPair(current, current)
		if err != nil {
			return false, err.Error()
		}
		cert = pair.Leaf
		return cert.SerialNumber.Cmp(old.SerialNumber) != 0, "serial " + cert.SerialNumber.String()
	})
	if cert.Subject.CommonName != "system:node:"+node || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("renewed client certificate subject %s, want CN=system:node:%s, O=system:nodes", cert.Subject, node)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(ca.Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("renewed client certificate: %v", err)
	}
	if life := cert.NotAfter.Sub(time.Now()); life < testSigningDuration-2*time.Minute || life > testSigningDuration {
		t.Errorf("renewed client certificate expires in %s, want the cluster signing duration %s", life, testSigningDuration)
	}
	if !cert.NotAfter.After(old.NotAfter) {
		t.Errorf("renewed client certificate NotAfter %s not after the old one's %s", cert.NotAfter, old.NotAfter)
	}
	req := issuingCSR(t, admin, certificatesv1.KubeAPIServerClientKubeletSignerName, cert)
	if req.Spec.Username != "system:node:"+node || !slices.Contains(req.Spec.Groups, "system:nodes") {
		t.Errorf("renewal CSR %s requested by %s %v, want the node itself", req.Name, req.Spec.Username, req.Spec.Groups)
	}
	if c := approved(req); c == nil || c.Reason != "AutoApproved" || !strings.Contains(c.Message, "self kubelet client certificate") {
		t.Errorf("renewal CSR %s: want approved by the self-node-client rule, got %+v", req.Name, req.Status.Conditions)
	}
	return cert
}

// issuingCSR returns the CSR of signer whose issued certificate is cert.
func issuingCSR(t *testing.T, admin kubernetes.Interface, signer string, cert *x509.Certificate) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.SignerName != signer || len(r.Status.Certificate) == 0 {
			continue
		}
		if certs, err := certutil.ParseCertsPEM(r.Status.Certificate); err == nil && certs[0].Equal(cert) {
			return r
		}
	}
	t.Fatalf("no %s CSR issued the certificate with serial %s", signer, cert.SerialNumber)
	return nil
}

func approved(r *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequestCondition {
	for i, c := range r.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == v1.ConditionTrue {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

// assertServingCert checks the kubelet server's certificate (port on 127.0.0.1): issued by ca through
// a kubernetes.io/kubelet-serving CSR approved by the node-addresses rule, its subjectAltNames exactly
// the Node's Hostname and InternalIP addresses.
func assertServingCert(t *testing.T, admin kubernetes.Interface, port int, node string, ca *pki.CA) {
	t.Helper()
	var leaf *x509.Certificate
	waitFor(t, 30*time.Second, "kubelet serving certificate from the cluster CA", func() (bool, string) {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{RootCAs: poolOf(ca.Cert), ServerName: "127.0.0.1"})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		leaf = conn.ConnectionState().PeerCertificates[0]
		return leaf.Subject.CommonName == "system:node:"+node, leaf.Subject.String()
	})
	n, err := admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names, ips []string
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case v1.NodeHostName:
			names = append(names, a.Address)
		case v1.NodeInternalIP:
			ips = append(ips, a.Address)
		}
	}
	var certIPs []string
	for _, ip := range leaf.IPAddresses {
		certIPs = append(certIPs, ip.String())
	}
	if !slices.Equal(leaf.DNSNames, names) || !slices.Equal(certIPs, ips) {
		t.Errorf("serving certificate SANs DNS %v IP %v, want the Node's addresses %v %v", leaf.DNSNames, certIPs, names, ips)
	}
	req := issuingCSR(t, admin, certificatesv1.KubeletServingSignerName, leaf)
	if c := approved(req); c == nil || req.Spec.Username != "system:node:"+node || !strings.Contains(c.Message, "the node's addresses") {
		t.Errorf("serving CSR %s by %s: want approved by the node-addresses rule, got %+v", req.Name, req.Spec.Username, req.Status.Conditions)
	}
}

// assertForgedCSRsRefused: node's credentials asking for another node's client or serving certificate
// are refused (403 from NodeRestriction, naming the CN a node may ask for), so no such request ever
// reaches the approver, whose rules leave one pending besides (TestRecognize, TestRecognizeServing).
func assertForgedCSRsRefused(t *testing.T, api *apifw.Server, node string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(api.UserConfig(t, "system:node:"+node, "system:nodes"))
	victim := "system:node:" + node + "-victim"
	for _, tc := range []struct {
		signer string
		dns    []string
		usage  certificatesv1.KeyUsage
	}{
		{certificatesv1.KubeAPIServerClientKubeletSignerName, nil, certificatesv1.UsageClientAuth},
		{certificatesv1.KubeletServingSignerName, []string{node}, certificatesv1.UsageServerAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := certutil.MakeCSR(key, &pkix.Name{CommonName: victim, Organization: []string{"system:nodes"}}, tc.dns, nil)
		if err != nil {
			t.Fatal(err)
		}
		obj := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "forged-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: der, SignerName: tc.signer,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, tc.usage}}}
		_, err = cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), obj, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "CN=system:node:"+node) {
			t.Errorf("node %s creating a %s CSR for %s: want 403 naming its own CN, got %v", node, tc.signer, victim, err)
		}
	}
}

// waitHeartbeatAfter waits for the node's Lease to be renewed after t0 (the old client certificate's
// NotAfter: the renewal authenticated with the new one, on a new connection).
func waitHeartbeatAfter(t *testing.T, admin kubernetes.Interface, node string, t0 time.Time) {
	t.Helper()
	waitFor(t, time.Until(t0)+30*time.Second, "node Lease renewed after the old client certificate expired", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		return l.Spec.RenewTime.After(t0), "renewed " + l.Spec.RenewTime.String()
	})
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
