package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/certutil"
)

// Approver is the csrapproving controller. Queue keys are CSR names.
type Approver struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	nodes  corelisters.NodeLister
	*workloop.Loop
}

// NewApprover registers the approver on factory's CertificateSigningRequest informer.
func NewApprover(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Approver, error) {
	inf := factory.Certificates().V1().CertificateSigningRequests()
	a := &Approver{client: client, lister: inf.Lister(), nodes: factory.Core().V1().Nodes().Lister()}
	a.Loop = workloop.New("csrapproving", a.reconcile, log)
	if _, err := inf.Informer().AddEventHandler(a.Handler()); err != nil {
		return nil, err
	}
	return a, nil
}

// Recognize decides whether csr is a node certificate request this controller approves. It returns
// the approval message, or "" and the reason it is left pending.
//
// A client request (signer kubernetes.io/kube-apiserver-client-kubelet) is approved only when its PEM
// request parses and passes ValidateKubeletClient, and the requestor (spec.username/groups, set by the
// API server) is either a bootstrap-token user (group system:bootstrappers: a node joining) or the very
// node the certificate names (user system:node:<name> in system:nodes: renewal), as upstream's
// nodeclient and selfnodeclient recognizers with the
// system:certificates.k8s.io:certificatesigningrequests:nodeclient and :selfnodeclient roles bound as
// kubeadm binds them.
//
// A serving request (signer kubernetes.io/kubelet-serving; upstream leaves these to a cluster's own
// approver) is approved only when it passes ValidateKubeletServing, comes from the very node it names,
// and every DNS and IP subjectAltName is one of that Node's status.addresses (Hostname, InternalDNS or
// ExternalDNS for names; InternalIP or ExternalIP for IPs); node is that Node, nil when it does not
// exist.
func Recognize(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) (approval, pending string) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName && csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return "", "signer " + csr.Spec.SignerName + " is not auto-approved"
	}
	req, err := certutil.ParseCSR(csr.Spec.Request)
	if err != nil {
		return "", "spec.request: " + err.Error()
	}
	if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
		return recognizeServing(csr, req, node)
	}
	if err := ValidateKubeletClient(req, csr.Spec.Usages); err != nil {
		return "", "not a node client certificate request: " + err.Error()
	}
	switch {
	case slices.Contains(csr.Spec.Groups, BootstrappersGroup):
		return "Auto approving kubelet client certificate after SubjectAccessReview.", ""
	case csr.Spec.Username == req.Subject.CommonName && slices.Contains(csr.Spec.Groups, NodesGroup):
		return "Auto approving self kubelet client certificate after SubjectAccessReview.", ""
	}
	return "", "requestor " + csr.Spec.Username + " is neither a bootstrapper nor node " + req.Subject.CommonName
}

// recognizeServing is Recognize for kubelet-serving requests.
func recognizeServing(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, node *corev1.Node) (string, string) {
	if err := ValidateKubeletServing(req, csr.Spec.Usages); err != nil {
		return "", "not a kubelet serving certificate request: " + err.Error()
	}
	if csr.Spec.Username != req.Subject.CommonName || !slices.Contains(csr.Spec.Groups, NodesGroup) {
		return "", "requestor " + csr.Spec.Username + " is not node " + req.Subject.CommonName
	}
	if node == nil {
		return "", "node " + req.Subject.CommonName + " is not registered"
	}
	names, ips := map[string]bool{}, map[string]bool{}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names[a.Address] = true
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips[ip.String()] = true
			}
		}
	}
	for _, n := range req.DNSNames {
		if !names[n] {
			return "", fmt.Sprintf("DNS subjectAltName %q is not an address of node %s", n, node.Name)
		}
	}
	for _, ip := range req.IPAddresses {
		if !ips[ip.String()] {
			return "", fmt.Sprintf("IP subjectAltName %s is not an address of node %s", ip, node.Name)
		}
	}
	return "Auto approving kubelet serving certificate: its subjectAltNames are the node's addresses.", ""
}

func (a *Approver) reconcile(ctx context.Context, name string) error {
	csr, err := a.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(csr.Status.Certificate) > 0 || hasTrue(csr, certificatesv1.CertificateApproved) || hasTrue(csr, certificatesv1.CertificateDenied) {
		return nil
	}
	var node *corev1.Node
	if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
		if req, err := certutil.ParseCSR(csr.Spec.Request); err == nil {
			n, err := a.nodes.Get(strings.TrimPrefix(req.Subject.CommonName, NodeUserPrefix))
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("csr %s: node %s not (yet) known", name, req.Subject.CommonName) // retried with backoff
			}
			if err != nil {
				return err
			}
			node = n
		}
	}
	msg, pending := Recognize(csr, node)
	if msg == "" {
		a.Log().Info("csr left pending for manual approval", "csr", name, "requestor", csr.Spec.Username, "reason", pending)
		return nil
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: msg,
		LastUpdateTime: metav1.Now(),
	})
	if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	a.Log().Info("csr approved", "csr", name, "requestor", csr.Spec.Username, "signer", csr.Spec.SignerName)
	return nil
}
