package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

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

// MinSigningDuration is the shortest lifetime a request may ask for: spec.expirationSeconds below it is
// raised to it (kube-controller-manager's 10-minute floor). The configured maximum is not bound by it
// (as --cluster-signing-duration is not), so a test cluster can issue certificates of seconds.
const MinSigningDuration = 10 * time.Minute

// DefaultSigningDuration is the longest lifetime the signer issues when none is configured
// (kube-controller-manager's --cluster-signing-duration default, one year).
const DefaultSigningDuration = 365 * 24 * time.Hour

// Authority signs a verified certificate request with the cluster CA and returns the PEM certificate
// (the control plane's pki.CA implements it).
type Authority interface {
	SignRequest(req *x509.CertificateRequest, usage x509.KeyUsage, ext []x509.ExtKeyUsage, ttl time.Duration) ([]byte, error)
}

// Signer is the csrsigning controller. Queue keys are CSR names.
type Signer struct {
	client   kubernetes.Interface
	lister   certlisters.CertificateSigningRequestLister
	ca       Authority
	duration time.Duration
	*workloop.Loop
}

// signers maps each signer name this controller serves to its request rules.
var signers = map[string]func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error{
	certificatesv1.KubeAPIServerClientKubeletSignerName: ValidateKubeletClient,
	certificatesv1.KubeletServingSignerName:             ValidateKubeletServing,
}

// NewSigner registers the signer on factory's CertificateSigningRequest informer. maxDuration caps the
// certificates' lifetime (0: DefaultSigningDuration; negative is an error).
func NewSigner(client kubernetes.Interface, factory informers.SharedInformerFactory, ca Authority, maxDuration time.Duration, log *slog.Logger) (*Signer, error) {
	if ca == nil {
		return nil, fmt.Errorf("csrsigning: no certificate authority")
	}
	if maxDuration < 0 {
		return nil, fmt.Errorf("csrsigning: --cluster-signing-duration %s: must not be negative", maxDuration)
	}
	if maxDuration == 0 {
		maxDuration = DefaultSigningDuration
	}
	inf := factory.Certificates().V1().CertificateSigningRequests()
	s := &Signer{client: client, lister: inf.Lister(), ca: ca, duration: maxDuration}
	s.Loop = workloop.New("csrsigning", s.reconcile, log)
	if _, err := inf.Informer().AddEventHandler(s.Handler()); err != nil {
		return nil, err
	}
	return s, nil
}

// ttl is spec.expirationSeconds raised to MinSigningDuration and capped at the configured maximum, or
// the maximum.
func (s *Signer) ttl(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return s.duration
	}
	return min(max(time.Duration(*expirationSeconds)*time.Second, MinSigningDuration), s.duration)
}

func (s *Signer) reconcile(ctx context.Context, name string) error {
	csr, err := s.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	rules, ours := signers[csr.Spec.SignerName]
	if !ours || len(csr.Status.Certificate) > 0 || !hasTrue(csr, certificatesv1.CertificateApproved) || hasTrue(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	csr = csr.DeepCopy()
	req, err := certutil.ParseCSR(csr.Spec.Request)
	if err == nil {
		err = rules(req, csr.Spec.Usages)
	}
	var usage x509.KeyUsage
	var ext []x509.ExtKeyUsage
	if err == nil {
		usage, ext, err = keyUsages(csr.Spec.Usages)
	}
	if err != nil {
		s.Log().Warn("csr cannot be signed", "csr", name, "signer", csr.Spec.SignerName, "err", err)
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure",
			Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
		_, err = s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		return err
	}
	ttl := s.ttl(csr.Spec.ExpirationSeconds)
	cert, err := s.ca.SignRequest(req, usage, ext, ttl)
	if err != nil {
		return fmt.Errorf("sign csr %s: %w", name, err)
	}
	csr.Status.Certificate = cert
	if _, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	s.Log().Info("csr signed", "csr", name, "signer", csr.Spec.SignerName, "subject", req.Subject.CommonName, "ttl", ttl)
	return nil
}

var (
	keyUsageBits = map[certificatesv1.KeyUsage]x509.KeyUsage{
		certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
		certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
		certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
		certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
		certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
		certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
		certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
		certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
		certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
		certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
	}
	extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
		certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
		certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
		certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
		certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
		certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
		certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
		certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
		certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
		certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
		certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
		certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
		certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
		certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
	}
)

// keyUsages maps certificates.k8s.io usages to x509 key usage bits and extended key usages.
func keyUsages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var bits x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range usages {
		if b, ok := keyUsageBits[u]; ok {
			bits |= b
		} else if e, ok := extKeyUsages[u]; ok {
			ext = append(ext, e)
		} else {
			return 0, nil, fmt.Errorf("unknown key usage %q", u)
		}
	}
	return bits, ext, nil
}
