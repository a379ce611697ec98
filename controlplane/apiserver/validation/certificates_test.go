package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestCertificateSigningRequest covers the create and update rules of certificates.k8s.io/v1 CSRs.
func TestCertificateSigningRequest(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-a"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			}}
	}
	if errs := CertificateSigningRequest(good()); len(errs) != 0 {
		t.Fatalf("valid csr: %v", errs)
	}
	seconds := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		what string
		edit func(*certificatesv1.CertificateSigningRequest)
		path string
		typ  field.ErrorType
	}{
		{"no request", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = nil }, "spec.request", field.ErrorTypeRequired},
		{"certificate instead of request", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		}, "spec.request", field.ErrorTypeInvalid},
		{"garbage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("x") }, "spec.request", field.ErrorTypeInvalid},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }, "spec.signerName", field.ErrorTypeRequired},
		{"signer without path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" }, "spec.signerName", field.ErrorTypeInvalid},
		{"legacy signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" }, "spec.signerName", field.ErrorTypeInvalid},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, "spec.usages", field.ErrorTypeRequired},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"fly"} }, "spec.usages[0]", field.ErrorTypeNotSupported},
		{"duplicate usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}, "spec.usages[2]", field.ErrorTypeDuplicate},
		{"too short", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = seconds(599) }, "spec.expirationSeconds", field.ErrorTypeInvalid},
		{"bad name", func(c *certificatesv1.CertificateSigningRequest) { c.Name = "Not_A_Name" }, "metadata.name", field.ErrorTypeInvalid},
	} {
		c := good()
		tc.edit(c)
		if errs := CertificateSigningRequest(c); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s %s, got %v", tc.what, tc.typ, tc.path, errs)
		}
	}

	approved := good()
	approved.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	both := approved.DeepCopy()
	both.Status.Conditions = append(both.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	if errs := CertificateSigningRequestUpdate(both, approved); !hasCause(errs, "status.conditions", field.ErrorTypeInvalid) {
		t.Errorf("approved and denied: %v", errs)
	}
	if errs := CertificateSigningRequestUpdate(good(), approved); !hasCause(errs, "status.conditions", field.ErrorTypeForbidden) {
		t.Errorf("approval removed: %v", errs)
	}
	dup := approved.DeepCopy()
	dup.Status.Conditions = append(dup.Status.Conditions, dup.Status.Conditions[0])
	if errs := CertificateSigningRequestUpdate(dup, approved); !hasCause(errs, "status.conditions[1].type", field.ErrorTypeDuplicate) {
		t.Errorf("duplicate approval: %v", errs)
	}
	badStatus := approved.DeepCopy()
	badStatus.Status.Conditions[0].Status = "Maybe"
	if errs := CertificateSigningRequestUpdate(badStatus, approved); !hasCause(errs, "status.conditions[0].status", field.ErrorTypeNotSupported) {
		t.Errorf("condition status Maybe: %v", errs)
	}

	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	issued := approved.DeepCopy()
	issued.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	if errs := CertificateSigningRequestUpdate(issued, approved); len(errs) != 0 {
		t.Errorf("issuing a certificate: %v", errs)
	}
	changed := issued.DeepCopy()
	changed.Status.Certificate = append(changed.Status.Certificate, issued.Status.Certificate...)
	if errs := CertificateSigningRequestUpdate(changed, issued); !hasCause(errs, "status.certificate", field.ErrorTypeForbidden) {
		t.Errorf("certificate changed once set: %v", errs)
	}
	keyBlock := approved.DeepCopy()
	keyBlock.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})
	if errs := CertificateSigningRequestUpdate(keyBlock, approved); !hasCause(errs, "status.certificate", field.ErrorTypeInvalid) {
		t.Errorf("non-certificate PEM: %v", errs)
	}
}
