package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutilk8s "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/jointoken"
	"github.com/nodekit/nodekit/internal/certutil"
	"github.com/nodekit/nodekit/internal/podnet"
	"github.com/nodekit/nodekit/kubelet/bootstrap"
	"github.com/nodekit/nodekit/server"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// joinCluster is a test API server with the controllers a node join needs (csrapproving, csrsigning
// with the cluster CA, tokencleaner, bootstrapsigner).
type joinCluster struct {
	*fw.Server
	ca *pki.CA
}

func startJoinCluster(t *testing.T) *joinCluster {
	t.Helper()
	s := fw.Start(t, fw.Options{})
	ca, err := pki.LoadOrCreateCA(server.Config{DataDir: s.DataDir}.Paths().PKIDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllers.Run(ctx, s.Client, controllers.Options{
			Controllers:   []string{controllers.CSRApproving, controllers.CSRSigning, controllers.TokenCleaner, controllers.BootstrapSigner},
			ClusterSigner: ca,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	return &joinCluster{Server: s, ca: ca}
}

// createToken stores a bootstrap token Secret as `kubeadm token create` does and returns the token.
func (c *joinCluster) createToken(t *testing.T, expiration time.Time, extraGroups string) string {
	t.Helper()
	tok, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(tok, ".")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenExpirationKey:       expiration.UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
			bootstrapapi.BootstrapTokenExtraGroupsKey:      extraGroups,
			bootstrapapi.BootstrapTokenDescriptionKey:      "test " + t.Name(),
		},
	}
	if _, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctxT(t), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokenClient is what the agent's bootstrap uses: the cluster CA and a bearer token, no client cert.
func (c *joinCluster) tokenClient(token string) *kubernetes.Clientset {
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = token
	return kubernetes.NewForConfigOrDie(cfg)
}

// waitAuthenticated waits until the token authenticates (the authenticator reads the watch cache,
// which trails the write by moments); a bootstrapper may list CSRs.
func waitAuthenticated(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err = cs.CertificatesV1().CertificateSigningRequests().List(ctxT(t), metav1.ListOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("bootstrap token never authenticated: %v", err)
}

// nodeCSR returns a PEM certificate request for the subject and DNS SANs, and its key.
func nodeCSR(t *testing.T, cn string, orgs []string, dns []string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := certutilk8s.MakeCSR(key, &pkix.Name{CommonName: cn, Organization: orgs}, dns, nil)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

var kubeletClientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// requestNodeCert runs client-go's kubelet bootstrap sequence (RequestCertificate, WaitForCertificate)
// and returns the issued certificate and a client authenticating with it.
func (c *joinCluster) requestNodeCert(t *testing.T, cs kubernetes.Interface, node string, d time.Duration) (*x509.Certificate, string, *kubernetes.Clientset) {
	t.Helper()
	req, key := nodeCSR(t, "system:node:"+node, []string{"system:nodes"}, nil)
	name, uid, err := csr.RequestCertificate(cs, req, "", certificatesv1.KubeAPIServerClientKubeletSignerName, &d, kubeletClientUsages, key)
	if err != nil {
		t.Fatalf("RequestCertificate: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(ctx, cs, name, uid)
	if err != nil {
		t.Fatalf("WaitForCertificate %s: %v", name, err)
	}
	certs, err := certutilk8s.ParseCertsPEM(certPEM)
	if err != nil || len(certs) != 1 {
		t.Fatalf("issued certificate: %v (%d certs)", err, len(certs))
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.CertData, cfg.KeyData = certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return certs[0], name, kubernetes.NewForConfigOrDie(cfg)
}

// TestNodeJoinWithBootstrapToken is a node join as kubeadm and the kubelet's TLS bootstrap do it: a
// bootstrap token Secret authenticates as system:bootstrap:<id>, the CSR it creates is auto-approved and
// signed by the cluster CA, and the certificate authenticates as the node with the node's permissions.
func TestNodeJoinWithBootstrapToken(t *testing.T) {
	c := startJoinCluster(t)
	ctx := ctxT(t)
	token := c.createToken(t, time.Now().Add(time.Hour), "system:bootstrappers:nodekit:default-node-token")
	id, _, _ := strings.Cut(token, ".")
	boot := c.tokenClient(token)
	waitAuthenticated(t, boot)

	// The bootstrapper may do nothing but CSRs.
	if _, err := boot.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bootstrapper listing pods: want 403, got %v", err)
	}
	if _, err := boot.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bootstrapper listing secrets: want 403, got %v", err)
	}
	if _, err := boot.CoreV1().Nodes().Create(ctx, nodeObj("join-a"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bootstrapper creating a node: want 403, got %v", err)
	}

	cert, csrName, node := c.requestNodeCert(t, boot, "join-a", 2*time.Hour)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(c.ca.Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("issued certificate does not chain to the cluster CA: %v", err)
	}
	if cert.Subject.CommonName != "system:node:join-a" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Fatalf("issued subject %v, want CN=system:node:join-a O=system:nodes", cert.Subject)
	}
	if life := time.Until(cert.NotAfter); life < 110*time.Minute || life > 2*time.Hour {
		t.Fatalf("certificate lives %s more, want the requested 2h (expirationSeconds)", life)
	}
	stored, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, csrName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Username != "system:bootstrap:"+id {
		t.Fatalf("csr username %q, want system:bootstrap:%s", stored.Spec.Username, id)
	}
	for _, g := range []string{"system:bootstrappers", "system:bootstrappers:nodekit:default-node-token", "system:authenticated"} {
		if !slices.Contains(stored.Spec.Groups, g) {
			t.Fatalf("csr groups %v lack %s", stored.Spec.Groups, g)
		}
	}
	if c, ok := csrCondition(stored, certificatesv1.CertificateApproved); !ok || c.Reason != "AutoApproved" {
		t.Fatalf("csr conditions %+v, want Approved/AutoApproved", stored.Status.Conditions)
	}

	// The certificate is the node's identity: its own Node works, another node's is refused.
	if _, err := node.CoreV1().Nodes().Create(ctx, nodeObj("join-a"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creating its own Node: %v", err)
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, nodeObj("join-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Reading another Node is the route controller's bootstrap grant (podnet.RouteReaderRole); without it,
	// the Node authorizer refuses it.
	if _, err := node.CoreV1().Nodes().Get(ctx, "join-b", metav1.GetOptions{}); err != nil {
		t.Fatalf("node join-a reading node join-b through %s: %v", podnet.RouteReaderRole, err)
	}
	if err := c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, podnet.RouteReaderRole, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.CoreV1().Nodes().Get(ctx, "join-b", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node join-a reading node join-b: want 403, got %v", err)
	}
	other, err := c.Client.CoreV1().Nodes().Get(ctx, "join-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Labels = map[string]string{"stolen": "true"}
	if _, err := node.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node join-a updating node join-b: want 403, got %v", err)
	}
	if _, err := node.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node listing secrets: want 403, got %v", err)
	}

	// Renewal: the node may get a new certificate for itself, but not for another node.
	renewed, _, _ := c.requestNodeCert(t, node, "join-a", time.Hour)
	if renewed.Subject.CommonName != "system:node:join-a" {
		t.Fatalf("renewed subject %v", renewed.Subject)
	}
	req, _ := nodeCSR(t, "system:node:join-b", []string{"system:nodes"}, nil)
	_, err = node.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "renew-foreign"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Usages: kubeletClientUsages}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "can only create a node CSR with CN=system:node:join-a") {
		t.Fatalf("node join-a requesting join-b's certificate: want 403 from NodeRestriction, got %v", err)
	}
	servingReq, _ := nodeCSR(t, "system:node:join-a", []string{"system:nodes"}, []string{"join-a.example"})
	serving := c.createCSR(t, node, "serving-join-a", servingReq, certificatesv1.KubeletServingSignerName,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth})
	c.expectPending(t, serving) // a name that is not one of the Node's addresses: left to an admin

	// An admin approves the serving request; csrsigning issues a server certificate with its SANs.
	obj, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, serving, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Status.Conditions = append(obj.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AdminApproved"})
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, serving, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctxW, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(ctxW, c.Client, serving, obj.UID)
	if err != nil {
		t.Fatalf("serving certificate: %v", err)
	}
	sc, err := certutilk8s.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sc[0].DNSNames, []string{"join-a.example"}) || !slices.Equal(sc[0].ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Fatalf("serving certificate SANs %v usages %v", sc[0].DNSNames, sc[0].ExtKeyUsage)
	}
	if life := time.Until(sc[0].NotAfter); life < 364*24*time.Hour {
		t.Fatalf("serving certificate lives %s, want the default year", life)
	}
}

// TestBootstrapTokenRejections: wrong secret, unknown id, expired token and a token not marked for
// authentication are 401; expired token Secrets are deleted by the token cleaner.
func TestBootstrapTokenRejections(t *testing.T) {
	c := startJoinCluster(t)
	ctx := ctxT(t)
	good := c.createToken(t, time.Now().Add(time.Hour), "")
	waitAuthenticated(t, c.tokenClient(good))
	id, _, _ := strings.Cut(good, ".")

	unauthorized := func(what, tok string) {
		t.Helper()
		if _, err := c.tokenClient(tok).CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			t.Fatalf("%s: want 401, got %v", what, err)
		}
	}
	unauthorized("wrong secret", id+".0123456789abcdef")
	unauthorized("unknown id", "zzzzzz.0123456789abcdef")

	// Not marked for authentication.
	noAuth := c.createToken(t, time.Now().Add(time.Hour), "")
	noAuthID, _, _ := strings.Cut(noAuth, ".")
	sec, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, "bootstrap-token-"+noAuthID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(sec.Data, bootstrapapi.BootstrapTokenUsageAuthentication)
	if _, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the watch cache see the update
	unauthorized("token without usage-bootstrap-authentication", noAuth)

	// Already expired: refused, and its Secret is cleaned up.
	expired := c.createToken(t, time.Now().Add(-time.Minute), "")
	unauthorized("expired token", expired)
	expiredID, _, _ := strings.Cut(expired, ".")
	c.waitSecretGone(t, "bootstrap-token-"+expiredID)

	// Expiring soon: works until then, then it is refused and cleaned up.
	soon := c.createToken(t, time.Now().Add(6*time.Second), "")
	soonID, _, _ := strings.Cut(soon, ".")
	c.waitSecretGone(t, "bootstrap-token-"+soonID)
	unauthorized("token past its expiration", soon)
	if _, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{}); err != nil {
		t.Fatalf("the unexpired token's Secret must stay: %v", err)
	}
}

func (c *joinCluster) waitSecretGone(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctxT(t), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
	}
	t.Fatalf("secret kube-system/%s was not deleted by the token cleaner", name)
}

func (c *joinCluster) createCSR(t *testing.T, cs kubernetes.Interface, name string, req []byte, signer string, usages []certificatesv1.KeyUsage) string {
	t.Helper()
	obj := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: req, SignerName: signer, Usages: usages,
			// Client-set requestor fields are ignored.
			Username: "kubernetes-admin", Groups: []string{"system:masters"},
		},
	}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctxT(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create csr %s: %v", name, err)
	}
	return name
}

// expectPending waits long enough for the approver to have seen the CSR and asserts it stays pending
// with no certificate.
func (c *joinCluster) expectPending(t *testing.T, names ...string) {
	t.Helper()
	time.Sleep(3 * time.Second)
	for _, name := range names {
		c.expectPendingNow(t, name)
	}
}

func (c *joinCluster) expectPendingNow(t *testing.T, name string) {
	t.Helper()
	got, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || len(got.Status.Certificate) != 0 {
		t.Fatalf("csr %s: want pending without certificate, got conditions %+v, %d certificate bytes", name, got.Status.Conditions, len(got.Status.Certificate))
	}
	if slices.Contains(got.Spec.Groups, "system:masters") || got.Spec.Username == "kubernetes-admin" {
		t.Fatalf("csr %s: client-set requestor kept: %s %v", name, got.Spec.Username, got.Spec.Groups)
	}
}

// TestCSRPolicy: requests that are not exactly a node client certificate stay pending; a malformed
// request is 422 naming spec.request; an admin approving a request the signer refuses gets a Failed
// condition and no certificate; kubectl get csr and kubectl certificate approve work.
func TestCSRPolicy(t *testing.T) {
	c := startJoinCluster(t)
	ctx := ctxT(t)
	boot := c.tokenClient(c.createToken(t, time.Now().Add(time.Hour), ""))
	waitAuthenticated(t, boot)

	masters, _ := nodeCSR(t, "system:masters", []string{"system:nodes"}, nil)
	mastersOrg, _ := nodeCSR(t, "system:node:evil", []string{"system:nodes", "system:masters"}, nil)
	serving, _ := nodeCSR(t, "system:node:evil", []string{"system:nodes"}, nil)
	withSAN, _ := nodeCSR(t, "system:node:evil", []string{"system:nodes"}, []string{"evil.example"})
	pending := []string{
		c.createCSR(t, boot, "cn-masters", masters, certificatesv1.KubeAPIServerClientKubeletSignerName, kubeletClientUsages),
		c.createCSR(t, boot, "o-masters", mastersOrg, certificatesv1.KubeAPIServerClientKubeletSignerName, kubeletClientUsages),
		c.createCSR(t, boot, "server-auth", serving, certificatesv1.KubeAPIServerClientKubeletSignerName,
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth}),
		c.createCSR(t, boot, "with-san", withSAN, certificatesv1.KubeAPIServerClientKubeletSignerName, kubeletClientUsages),
		c.createCSR(t, boot, "other-signer", serving, certificatesv1.KubeAPIServerClientSignerName, kubeletClientUsages),
	}
	c.expectPending(t, pending...)

	bad := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "malformed"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: []byte("-----BEGIN CERTIFICATE REQUEST-----\nnot base64\n-----END CERTIFICATE REQUEST-----\n"),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Usages: kubeletClientUsages}}
	if _, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.request") {
		t.Fatalf("malformed request: want 422 naming spec.request, got %v", err)
	}
	bad.Spec.Request = nil
	bad.Spec.SignerName = ""
	bad.Spec.Usages = []certificatesv1.KeyUsage{"fly"}
	_, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, bad, metav1.CreateOptions{})
	for _, f := range []string{"spec.request", "spec.signerName", "spec.usages[0]"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), f) {
			t.Fatalf("empty request: want 422 naming %s, got %v", f, err)
		}
	}

	// The bootstrapper cannot approve its own request.
	obj, err := boot.CertificatesV1().CertificateSigningRequests().Get(ctx, "o-masters", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Status.Conditions = append(obj.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue})
	if _, err := boot.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "o-masters", obj, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bootstrapper approving: want 403, got %v", err)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	table := run("get", "csr")
	for _, want := range []string{"SIGNERNAME", "REQUESTOR", "o-masters", "kubernetes.io/kube-apiserver-client-kubelet", "system:bootstrap:", "Pending"} {
		if !strings.Contains(table, want) {
			t.Fatalf("kubectl get csr lacks %q:\n%s", want, table)
		}
	}
	// An admin approves a request the signer must refuse: it ends Approved,Failed with no certificate.
	run("certificate", "approve", "o-masters")
	var got *certificatesv1.CertificateSigningRequest
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got, err = c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, "o-masters", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, failed := csrCondition(got, certificatesv1.CertificateFailed); failed {
			break
		}
	}
	f, failed := csrCondition(got, certificatesv1.CertificateFailed)
	if _, approved := csrCondition(got, certificatesv1.CertificateApproved); !approved || !failed || len(got.Status.Certificate) != 0 ||
		!strings.Contains(f.Message, "organization") {
		t.Fatalf("approved O=system:masters csr: want Approved+Failed (organization) without certificate, got %+v", got.Status)
	}
	if out := run("get", "csr", "o-masters"); !strings.Contains(out, "Approved,Failed") {
		t.Fatalf("kubectl get csr o-masters:\n%s", out)
	}
	// Approval cannot be taken back through /approval.
	got.Status.Conditions = nil
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "o-masters", got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("removing the Approved condition: want 422, got %v", err)
	}
}

// TestClusterInfo: kube-public/cluster-info holds kubeadm's discovery kubeconfig (the server URL and
// the cluster CA, whose pin is certutil.CAHash), readable anonymously; other anonymous reads are refused.
func TestClusterInfo(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	anon := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(s.Config))
	cm, err := anon.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("anonymous get cluster-info: %v", err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil {
		t.Fatalf("cluster-info kubeconfig: %v", err)
	}
	cluster, ok := cfg.Clusters[""]
	if !ok || len(cfg.Clusters) != 1 || cluster.Server != s.URL {
		t.Fatalf("cluster-info clusters %+v, want one cluster \"\" at %s", cfg.Clusters, s.URL)
	}
	caPEM, err := os.ReadFile(server.Config{DataDir: s.DataDir}.Paths().CACert)
	if err != nil {
		t.Fatal(err)
	}
	if string(cluster.CertificateAuthorityData) != string(caPEM) {
		t.Fatal("cluster-info certificate-authority-data is not the cluster CA")
	}
	certs, err := certutilk8s.ParseCertsPEM(cluster.CertificateAuthorityData)
	if err != nil {
		t.Fatal(err)
	}
	hash := certutil.CAHash(certs[0])
	if err := certutil.VerifyCAHash(hash, certs[0]); err != nil || len(hash) != len("sha256:")+64 {
		t.Fatalf("CA hash %q: %v", hash, err)
	}
	if err := certutil.VerifyCAHash("sha256:"+strings.Repeat("0", 64), certs[0]); err == nil {
		t.Fatal("a wrong CA pin verified")
	}
	if _, err := anon.CoreV1().ConfigMaps(metav1.NamespacePublic).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("anonymous list configmaps: want 403, got %v", err)
	}
	if _, err := anon.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("anonymous get of another namespace's configmap: want 403, got %v", err)
	}
	if _, err := anon.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("anonymous list secrets: want 403, got %v", err)
	}
	if _, err := anon.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("anonymous list nodes: want 403, got %v", err)
	}
}

func csrCondition(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) (certificatesv1.CertificateSigningRequestCondition, bool) {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond, true
		}
	}
	return certificatesv1.CertificateSigningRequestCondition{}, false
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// TestJoinTokens drives what `nodekit token create|list|delete` do against the real API server: the
// created token authenticates, the join command names the server and the CA hash, list shows it, the
// bootstrap signer signs cluster-info with it (jws-kubeconfig-<id>), and a deleted token is 401 and its
// signature is removed.
func TestJoinTokens(t *testing.T) {
	s := startJoinCluster(t)
	ctx := ctxT(t)
	tok, err := jointoken.Create(ctx, s.Client, jointoken.Options{TTL: time.Hour, Description: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := jointoken.ClusterInfo(ctx, s.Client)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(server.Config{DataDir: s.DataDir}.Paths().CACert)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certutilk8s.ParseCertsPEM(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	want := "nodekit agent --server " + s.URL + " --token " + tok + " --ca-hash " + certutil.CAHash(ca[0])
	if got := d.JoinCommand(tok); got != want {
		t.Fatalf("join command\n got %s\nwant %s", got, want)
	}
	toks, err := jointoken.List(ctx, s.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || toks[0].Token != tok || toks[0].Description != "e2e" || toks[0].Expires == nil ||
		time.Until(*toks[0].Expires) > time.Hour || !slices.Equal(toks[0].Usages, []string{"signing", "authentication"}) ||
		!slices.Equal(toks[0].Groups, []string{jointoken.DefaultGroup}) {
		t.Fatalf("list: %+v", toks)
	}
	boot := kubernetes.NewForConfigOrDie(&rest.Config{Host: s.URL, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	waitAuthenticated(t, boot)
	sigKey := bootstrapapi.JWSSignatureKeyPrefix + tok[:6]
	cm := waitClusterInfo(t, s.Client, func(cm *corev1.ConfigMap) bool { return cm.Data[sigKey] != "" })
	if !jws.DetachedTokenIsValid(cm.Data[sigKey], cm.Data[bootstrapapi.KubeConfigKey], tok[:6], tok[7:]) {
		t.Fatalf("%s does not verify the cluster-info kubeconfig with the token", sigKey)
	}
	if jws.DetachedTokenIsValid(cm.Data[sigKey], cm.Data[bootstrapapi.KubeConfigKey], tok[:6], "0123456789abcdef") {
		t.Fatal("the signature verifies with another secret")
	}
	id, err := jointoken.Delete(ctx, s.Client, tok)
	if err != nil || tok[:6] != id {
		t.Fatalf("delete: %q %v", id, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := boot.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted token: want 401, got %v", err)
		}
	}
	waitClusterInfo(t, s.Client, func(cm *corev1.ConfigMap) bool { _, ok := cm.Data[sigKey]; return !ok })
	if _, err := jointoken.Delete(ctx, s.Client, "abc"); err == nil {
		t.Fatal("delete of a malformed id succeeded")
	}
}

// TestAgentJoin is the contract with the agent side: kubelet/bootstrap.Join (what `nodekit agent --token
// --ca-hash` runs) against this API server and its controllers ends with a node kubeconfig that
// authenticates as system:node:<name>; a wrong CA pin is refused before the token is sent.
func TestAgentJoin(t *testing.T) {
	c := startJoinCluster(t)
	ctx := ctxT(t)
	tok, err := jointoken.Create(ctx, c.Client, jointoken.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d, err := jointoken.ClusterInfo(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	waitAuthenticated(t, c.tokenClient(tok))
	dir := t.TempDir()
	wrong := bootstrap.Config{Server: d.Server, Token: tok, CAHash: "sha256:" + strings.Repeat("ab", 32), NodeName: "agent-x",
		Kubeconfig: filepath.Join(dir, "wrong.kubeconfig"), DiscoveryTimeout: 10 * time.Second, CertificateTimeout: 10 * time.Second}
	if err := bootstrap.Join(ctx, wrong); err == nil || !strings.Contains(err.Error(), "ca-hash") {
		t.Fatalf("join with a wrong CA pin: want an error naming --ca-hash, got %v", err)
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := bootstrap.Join(ctx, bootstrap.Config{Server: d.Server, Token: tok, CAHash: d.CAHash, NodeName: "agent-a", Kubeconfig: kubeconfig}); err != nil {
		t.Fatalf("join: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(cfg)
	if _, err := node.CoreV1().Nodes().Create(ctx, nodeObj("agent-a"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("joined node creating its Node: %v", err)
	}
	if _, err := node.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("joined node listing secrets: want 403, got %v", err)
	}
}

// waitClusterInfo polls kube-public/cluster-info until ok accepts it.
func waitClusterInfo(t *testing.T, c kubernetes.Interface, ok func(*corev1.ConfigMap) bool) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cm, err = c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctxT(t), bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err == nil && ok(cm) {
			return cm
		}
	}
	t.Fatalf("cluster-info never reached the expected state: %v %v", err, cm)
	return nil
}
