package certificates

import (
	"context"
	"log/slog"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/certutil"
)

// Approver is the csrapproving controller. Queue keys are CSR names.
type Approver struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	*workloop.Loop
}

// NewApprover registers the approver on factory's CertificateSigningRequest informer.
func NewApprover(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Approver, error) {
	inf := factory.Certificates().V1().CertificateSigningRequests()
	a := &Approver{client: client, lister: inf.Lister()}
	a.Loop = workloop.New("csrapproving", a.reconcile, log)
	if _, err := inf.Informer().AddEventHandler(a.Handler()); err != nil {
		return nil, err
	}
	return a, nil
}

// Recognize decides whether csr is a node client certificate request this controller approves. It
// returns the approval message, or "" and the reason it is left pending. A request is approved only
// when its signer is kubernetes.io/kube-apiserver-client-kubelet, its PEM request parses and passes
// ValidateKubeletClient, and the requestor (spec.username/groups, set by the API server) is either a
// bootstrap-token user (group system:bootstrappers: a node joining) or the very node the certificate
// names (user system:node:<name> in system:nodes: renewal), as upstream's nodeclient and
// selfnodeclient recognizers with the system:certificates.k8s.io:certificatesigningrequests:nodeclient
// and :selfnodeclient roles bound as kubeadm binds them.
func Recognize(csr *certificatesv1.CertificateSigningRequest) (approval, pending string) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return "", "signer " + csr.Spec.SignerName + " is not auto-approved"
	}
	req, err := certutil.ParseCSR(csr.Spec.Request)
	if err != nil {
		return "", "spec.request: " + err.Error()
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
	msg, pending := Recognize(csr)
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
