// Package certificates holds kube-controller-manager's CertificateSigningRequest controllers for node
// certificates (certificates.k8s.io/v1):
//
//   - csrapproving (Approver) approves a kubelet's client-certificate request when it is exactly what
//     Kubernetes' node-client recognizers accept and comes from a bootstrap-token user (a new node) or
//     from the node itself (renewal); every other request stays pending, with a log line saying why;
//   - csrsigning (Signer) signs approved requests of the kubernetes.io/kube-apiserver-client-kubelet and
//     kubernetes.io/kubelet-serving signers with the cluster CA, or marks them Failed when they break the
//     signer's rules.
package certificates

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Identities of nodes and bootstrap-token users.
const (
	NodesGroup         = "system:nodes"
	NodeUserPrefix     = "system:node:"
	BootstrappersGroup = "system:bootstrappers"
)

var (
	// kubelet client certificates: exactly these usages (upstream's kubeletClientRequiredUsages and
	// the form without key encipherment, for non-RSA keys).
	kubeletClientUsages = []sets.Set[certificatesv1.KeyUsage]{
		sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth),
		sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth),
	}
	kubeletServingUsages = []sets.Set[certificatesv1.KeyUsage]{
		sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth),
		sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth),
	}
)

// ValidateKubeletClient checks a request for the kubernetes.io/kube-apiserver-client-kubelet signer as
// Kubernetes does (ValidateKubeletClientCSR): subject O exactly [system:nodes], CN system:node:<name>
// with a name, no DNS, IP, e-mail or URI SANs, and usages exactly {digital signature, key encipherment,
// client auth} or {digital signature, client auth}. The error says which rule failed.
func ValidateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if err := sans(req, false); err != nil {
		return err
	}
	return usagesOneOf(usages, kubeletClientUsages)
}

// ValidateKubeletServing checks a request for the kubernetes.io/kubelet-serving signer as Kubernetes
// does (ValidateKubeletServingCSR): subject O exactly [system:nodes], CN system:node:<name>, at least
// one DNS or IP SAN and no e-mail or URI SANs, usages exactly {digital signature, key encipherment,
// server auth} or {digital signature, server auth}.
func ValidateKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	if err := sans(req, true); err != nil {
		return err
	}
	return usagesOneOf(usages, kubeletServingUsages)
}

// sans refuses e-mail and URI SANs; DNS and IP SANs are required (serving) or refused (client).
func sans(req *x509.CertificateRequest, serving bool) error {
	hostSANs := len(req.DNSNames) + len(req.IPAddresses)
	switch {
	case serving && hostSANs == 0:
		return fmt.Errorf("DNS or IP subjectAltName is required")
	case !serving && len(req.DNSNames) > 0:
		return fmt.Errorf("DNS subjectAltNames are not allowed")
	case !serving && len(req.IPAddresses) > 0:
		return fmt.Errorf("IP subjectAltNames are not allowed")
	case len(req.EmailAddresses) > 0:
		return fmt.Errorf("email subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return fmt.Errorf("URI subjectAltNames are not allowed")
	}
	return nil
}

func nodeSubject(req *x509.CertificateRequest) error {
	if !slices.Equal(req.Subject.Organization, []string{NodesGroup}) {
		return fmt.Errorf("subject organization must be exactly [%s], not %q", NodesGroup, req.Subject.Organization)
	}
	if name, ok := strings.CutPrefix(req.Subject.CommonName, NodeUserPrefix); !ok || name == "" {
		return fmt.Errorf("subject common name must be %s<node name>, not %q", NodeUserPrefix, req.Subject.CommonName)
	}
	return nil
}

func usagesOneOf(usages []certificatesv1.KeyUsage, allowed []sets.Set[certificatesv1.KeyUsage]) error {
	got := sets.New(usages...)
	for _, a := range allowed {
		if got.Equal(a) {
			return nil
		}
	}
	return fmt.Errorf("usages %v must be exactly %v or %v", sets.List(got), sets.List(allowed[0]), sets.List(allowed[1]))
}

// condition returns the request's condition of type t, if any.
func condition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) (certificatesv1.CertificateSigningRequestCondition, bool) {
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return certificatesv1.CertificateSigningRequestCondition{}, false
}

// hasTrue reports whether the request has condition t with status True (or empty, which means True).
func hasTrue(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	c, ok := condition(csr, t)
	return ok && (c.Status == corev1.ConditionTrue || c.Status == "")
}
