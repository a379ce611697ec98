package validation

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/certutil"
)

// MinCSRExpirationSeconds is the shortest certificate lifetime a CertificateSigningRequest may ask for
// (spec.expirationSeconds), as in certificates.k8s.io/v1.
const MinCSRExpirationSeconds = 600

// legacyUnknownSigner is certificates.k8s.io/v1beta1's default signer, which v1 refuses.
const legacyUnknownSigner = "kubernetes.io/legacy-unknown"

// csrUsages are the key usages certificates.k8s.io/v1 defines (KeyUsage constants).
var csrUsages = sets.New(
	certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
	certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
	certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
	certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
	certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
	certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
	certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
)

// CertificateSigningRequest validates a new CSR as certificates.k8s.io/v1 does: spec.request is one PEM
// CERTIFICATE REQUEST whose signature verifies, spec.signerName is a qualified name
// (<DNS subdomain>/<path>, not kubernetes.io/legacy-unknown), spec.usages are known and unique,
// spec.expirationSeconds is at least 600, and the status is sane.
func CertificateSigningRequest(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := Subdomain(&csr.ObjectMeta)
	sp := field.NewPath("spec")
	if len(csr.Spec.Request) == 0 {
		errs = append(errs, field.Required(sp.Child("request"), "a PEM CERTIFICATE REQUEST is required"))
	} else if _, err := certutil.ParseCSR(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(sp.Child("request"), "<PEM data>", err.Error()))
	}
	errs = append(errs, signerName(csr.Spec.SignerName, sp.Child("signerName"))...)
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(sp.Child("usages"), "usages must be provided"))
	}
	seen := sets.New[certificatesv1.KeyUsage]()
	for i, u := range csr.Spec.Usages {
		p := sp.Child("usages").Index(i)
		switch {
		case !csrUsages.Has(u):
			errs = append(errs, field.NotSupported(p, u, sets.List(csrUsages)))
		case seen.Has(u):
			errs = append(errs, field.Duplicate(p, u))
		}
		seen.Insert(u)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < MinCSRExpirationSeconds {
		errs = append(errs, field.Invalid(sp.Child("expirationSeconds"), *e,
			fmt.Sprintf("may not specify a duration less than %d seconds", MinCSRExpirationSeconds)))
	}
	return append(errs, CertificateSigningRequestStatus(csr, nil)...)
}

// CertificateSigningRequestUpdate validates an update: the spec is immutable (the REST strategies keep
// it) and the status rules of CertificateSigningRequestStatus apply against old.
func CertificateSigningRequestUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return CertificateSigningRequestStatus(csr, old)
}

// CertificateSigningRequestStatus checks status.conditions (a type, a status of True/False/Unknown,
// Approved/Denied/Failed at most once each, never both Approved and Denied; on update an Approved or
// Denied condition may not be removed) and status.certificate (PEM CERTIFICATE blocks only; once set it
// may not change).
func CertificateSigningRequestStatus(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	cp := field.NewPath("status", "conditions")
	types := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range csr.Status.Conditions {
		p := cp.Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		switch c.Status {
		case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status,
				[]string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if types[c.Type] {
				errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
			}
		}
		types[c.Type] = true
	}
	if types[certificatesv1.CertificateApproved] && types[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(cp, certificatesv1.CertificateDenied, "Approved and Denied conditions are mutually exclusive"))
	}
	if old != nil {
		for _, c := range old.Status.Conditions {
			if (c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied) && !types[c.Type] {
				errs = append(errs, field.Forbidden(cp, fmt.Sprintf("the %s condition may not be removed", c.Type)))
			}
		}
	}
	certPath := field.NewPath("status", "certificate")
	if old != nil && len(old.Status.Certificate) > 0 && string(old.Status.Certificate) != string(csr.Status.Certificate) {
		errs = append(errs, field.Forbidden(certPath, "updates may not modify the certificate once set"))
	} else if len(csr.Status.Certificate) > 0 {
		if err := certificatePEM(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(certPath, "<PEM data>", err.Error()))
		}
	}
	return errs
}

// certificatePEM accepts one or more PEM CERTIFICATE blocks, each a parseable certificate, and nothing else.
func certificatePEM(data []byte) error {
	n := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			if len(strings.TrimSpace(string(data))) != 0 {
				return fmt.Errorf("data after the PEM blocks is not allowed")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("block %d: %w", n, err)
		}
		n++
		data = rest
	}
	if n == 0 {
		return fmt.Errorf("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// signerName checks a signer name: <DNS-1123 subdomain>/<path>, the path at most 253 characters of a
// qualified-name-like form, and not the legacy kubernetes.io/legacy-unknown (refused in v1).
func signerName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a signer name is required")}
	}
	if name == legacyUnknownSigner {
		return field.ErrorList{field.Invalid(p, name, "the legacy signer name is not allowed in certificates.k8s.io/v1")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || path == "" {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, "domain: "+msg))
	}
	if len(path) > 253 || strings.ContainsAny(path, " \t\n") {
		errs = append(errs, field.Invalid(p, name, "path must be at most 253 characters without white space"))
	}
	return errs
}
