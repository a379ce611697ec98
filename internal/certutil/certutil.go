// Package certutil holds the small x509 helpers that the control plane and the node agent share without
// either importing the other: the CA public-key pin of kubeadm's token discovery
// (--discovery-token-ca-cert-hash, "sha256:<hex>") and the parsing of a PEM certificate signing request as
// certificates.k8s.io defines spec.request. It imports nothing of nodekit.
package certutil

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// CAHashPrefix is the only pin format kubeadm accepts: "sha256:" followed by 64 lower-case hex digits.
const CAHashPrefix = "sha256:"

// CAHash returns the pin of a CA certificate: "sha256:" + hex(SHA-256 of the certificate's DER
// SubjectPublicKeyInfo), kubeadm's discovery-token-ca-cert-hash. It pins the CA's key, so a CA
// re-issued with the same key keeps its hash.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return CAHashPrefix + hex.EncodeToString(sum[:])
}

// VerifyCAHash checks that cert matches pin ("sha256:<64 hex digits>", compared in constant time). It
// returns an error naming a malformed pin, or the certificate's actual hash on a mismatch.
func VerifyCAHash(pin string, cert *x509.Certificate) error {
	hexPart, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(pin)), CAHashPrefix)
	if !ok {
		return fmt.Errorf("CA hash %q: want the format %s<hex>", pin, CAHashPrefix)
	}
	want, err := hex.DecodeString(hexPart)
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("CA hash %q: want %d hex digits after %s", pin, 2*sha256.Size, CAHashPrefix)
	}
	got := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	if subtle.ConstantTimeCompare(want, got[:]) != 1 {
		return fmt.Errorf("CA certificate %q has hash %s, not the pinned %s", cert.Subject.CommonName, CAHash(cert), pin)
	}
	return nil
}

// ParseCSR decodes exactly one PEM "CERTIFICATE REQUEST" block and checks the request's
// self-signature, as kube-apiserver requires of a CertificateSigningRequest's spec.request.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("must contain exactly one PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("signature does not verify: %w", err)
	}
	return req, nil
}
