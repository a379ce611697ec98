package certutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestCAHash(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	spki, _ := x509.MarshalPKIXPublicKey(key.Public())
	sum := sha256.Sum256(spki)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := CAHash(cert); got != want {
		t.Fatalf("CAHash = %s, want sha256 of the DER SubjectPublicKeyInfo %s", got, want)
	}
	if err := VerifyCAHash(strings.ToUpper(want[7:]), cert); err == nil {
		t.Fatal("a pin without sha256: verified")
	}
	if err := VerifyCAHash("sha256:"+strings.ToUpper(want[7:]), cert); err != nil {
		t.Fatalf("upper-case hex pin: %v", err)
	}
	for _, bad := range []string{"sha256:abc", "sha256:" + strings.Repeat("z", 64), "md5:" + want[7:]} {
		if err := VerifyCAHash(bad, cert); err == nil {
			t.Errorf("%q verified", bad)
		}
	}
	other := "sha256:" + strings.Repeat("0", 64)
	if err := VerifyCAHash(other, cert); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("mismatch error should name the actual hash: %v", err)
	}

	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	good := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER})
	if r, err := ParseCSR(good); err != nil || r.Subject.CommonName != "system:node:a" {
		t.Fatalf("ParseCSR: %v", err)
	}
	tampered := append([]byte(nil), csrDER...)
	tampered[len(tampered)-5] ^= 0xff
	for name, data := range map[string][]byte{
		"not PEM":       []byte("nope"),
		"wrong type":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: csrDER}),
		"two blocks":    append(append([]byte(nil), good...), good...),
		"bad signature": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}),
		"not a request": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der[:10]}),
	} {
		if _, err := ParseCSR(data); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
