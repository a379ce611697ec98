package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutilk8s "k8s.io/client-go/util/cert"

	"github.com/nodekit/nodekit/internal/certutil"
)

type req struct {
	cn   string
	orgs []string
	dns  []string
	ips  []net.IP
	mail []string
	uris []*url.URL
}

func csrPEM(t *testing.T, r req) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := certutilk8s.MakeCSRFromTemplate(key, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: r.cn, Organization: r.orgs}, DNSNames: r.dns, IPAddresses: r.ips,
		EmailAddresses: r.mail, URIs: r.uris,
	})
	if err != nil {
		t.Fatal(err)
	}
	return der
}

var (
	clientUsages      = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	clientUsagesRSA   = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	bootstrapper      = []string{"system:bootstrappers", "system:bootstrappers:nodekit:default-node-token", "system:authenticated"}
	nodeGroups        = []string{"system:nodes", "system:authenticated"}
	kubeletClientName = certificatesv1.KubeAPIServerClientKubeletSignerName
)

// TestRecognize covers the approver's decision: exactly a node client request from a bootstrapper or
// from the same node is approved; everything else stays pending with a reason.
func TestRecognize(t *testing.T) {
	nodeA := req{cn: "system:node:a", orgs: []string{"system:nodes"}}
	u, _ := url.Parse("spiffe://x/y")
	for _, tc := range []struct {
		name     string
		r        req
		signer   string
		usages   []certificatesv1.KeyUsage
		user     string
		groups   []string
		approve  bool
		pendWhy  string
		rawBytes []byte
	}{
		{name: "bootstrapper new node", r: nodeA, usages: clientUsages, user: "system:bootstrap:abcdef", groups: bootstrapper, approve: true},
		{name: "bootstrapper RSA usages", r: nodeA, usages: clientUsagesRSA, user: "system:bootstrap:abcdef", groups: bootstrapper, approve: true},
		{name: "node renews itself", r: nodeA, usages: clientUsages, user: "system:node:a", groups: nodeGroups, approve: true},
		{name: "node asks for another node", r: req{cn: "system:node:b", orgs: []string{"system:nodes"}}, usages: clientUsages,
			user: "system:node:a", groups: nodeGroups, pendWhy: "neither a bootstrapper nor node system:node:b"},
		{name: "user named like the node but not in system:nodes", r: nodeA, usages: clientUsages, user: "system:node:a",
			groups: []string{"system:authenticated"}, pendWhy: "neither"},
		{name: "plain user", r: nodeA, usages: clientUsages, user: "alice", groups: []string{"system:authenticated"}, pendWhy: "neither"},
		{name: "CN system:masters", r: req{cn: "system:masters", orgs: []string{"system:nodes"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "common name"},
		{name: "empty node name", r: req{cn: "system:node:", orgs: []string{"system:nodes"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "common name"},
		{name: "O system:masters added", r: req{cn: "system:node:a", orgs: []string{"system:nodes", "system:masters"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "organization"},
		{name: "O system:masters only", r: req{cn: "system:node:a", orgs: []string{"system:masters"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "organization"},
		{name: "DNS SAN", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"a"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "DNS"},
		{name: "IP SAN", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, ips: []net.IP{net.IPv4(10, 0, 0, 1)}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "IP"},
		{name: "email SAN", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, mail: []string{"a@b.c"}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "email"},
		{name: "URI SAN", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, uris: []*url.URL{u}}, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "URI"},
		{name: "server auth usage", r: nodeA, usages: append(clientUsages, certificatesv1.UsageServerAuth),
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "usages"},
		{name: "client auth alone", r: nodeA, usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "usages"},
		{name: "no client auth", r: nodeA, usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature},
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "usages"},
		{name: "other signer", r: nodeA, signer: certificatesv1.KubeAPIServerClientSignerName, usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "not auto-approved"},
		{name: "unparseable request", rawBytes: []byte("garbage"), usages: clientUsages,
			user: "system:bootstrap:abcdef", groups: bootstrapper, pendWhy: "spec.request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signer := tc.signer
			if signer == "" {
				signer = kubeletClientName
			}
			request := tc.rawBytes
			if request == nil {
				request = csrPEM(t, tc.r)
			}
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: request, SignerName: signer, Usages: tc.usages, Username: tc.user, Groups: tc.groups}}
			msg, why := Recognize(csr, nil)
			if tc.approve {
				if msg == "" || why != "" {
					t.Fatalf("want approval, got pending: %s", why)
				}
				return
			}
			if msg != "" || !strings.Contains(why, tc.pendWhy) {
				t.Fatalf("want pending mentioning %q, got approval %q / reason %q", tc.pendWhy, msg, why)
			}
		})
	}
}

func TestValidateKubeletServing(t *testing.T) {
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	parse := func(r req) *x509.CertificateRequest {
		c, err := certutil.ParseCSR(csrPEM(t, r))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ok := parse(req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"a"}, ips: []net.IP{net.IPv4(10, 0, 0, 1)}})
	if err := ValidateKubeletServing(ok, serving); err != nil {
		t.Fatalf("valid serving request: %v", err)
	}
	if err := ValidateKubeletServing(ok, clientUsages); err == nil {
		t.Fatal("client usages accepted for kubelet-serving")
	}
	if err := ValidateKubeletServing(parse(req{cn: "system:node:a", orgs: []string{"system:nodes"}}), serving); err == nil {
		t.Fatal("serving request without SANs accepted")
	}
}

func TestSignerTTLAndUsages(t *testing.T) {
	s := &Signer{duration: DefaultSigningDuration}
	sec := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		in   *int32
		want time.Duration
	}{
		{nil, DefaultSigningDuration},
		{sec(60), MinSigningDuration},
		{sec(7200), 2 * time.Hour},
		{sec(1 << 30), DefaultSigningDuration},
	} {
		if got := s.ttl(tc.in); got != tc.want {
			t.Errorf("ttl(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// A short --cluster-signing-duration caps every request, the 10-minute floor included.
	short := &Signer{duration: 30 * time.Second}
	if got := short.ttl(sec(600)); got != 30*time.Second {
		t.Errorf("ttl(600s) with a 30s maximum = %s, want 30s", got)
	}
	bits, ext, err := keyUsages(clientUsagesRSA)
	if err != nil || bits != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || len(ext) != 1 || ext[0] != x509.ExtKeyUsageClientAuth {
		t.Fatalf("keyUsages = %v %v %v", bits, ext, err)
	}
	if _, _, err := keyUsages([]certificatesv1.KeyUsage{"fly"}); err == nil {
		t.Fatal("unknown usage accepted")
	}
}

// TestRecognizeServing: a kubelet-serving request is approved only from the node it names and only for
// subjectAltNames among that Node's addresses.
func TestRecognizeServing(t *testing.T) {
	servingUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "a"}}}}
	for _, tc := range []struct {
		name    string
		r       req
		user    string
		node    *corev1.Node
		pendWhy string
	}{
		{name: "own addresses", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"a"}, ips: []net.IP{net.IPv4(10, 0, 0, 1)}}, user: "system:node:a", node: node},
		{name: "foreign IP", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, ips: []net.IP{net.IPv4(10, 0, 0, 2)}}, user: "system:node:a", node: node, pendWhy: "IP subjectAltName 10.0.0.2"},
		{name: "foreign name", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"kubernetes.default"}}, user: "system:node:a", node: node, pendWhy: `DNS subjectAltName "kubernetes.default"`},
		{name: "other node asks", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"a"}}, user: "system:node:b", node: node, pendWhy: "is not node system:node:a"},
		{name: "unregistered node", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}, dns: []string{"a"}}, user: "system:node:a", pendWhy: "not registered"},
		{name: "no SAN", r: req{cn: "system:node:a", orgs: []string{"system:nodes"}}, user: "system:node:a", node: node, pendWhy: "subjectAltName is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: csrPEM(t, tc.r), SignerName: certificatesv1.KubeletServingSignerName, Usages: servingUsages, Username: tc.user, Groups: nodeGroups}}
			msg, why := Recognize(csr, tc.node)
			if tc.pendWhy == "" {
				if msg == "" {
					t.Fatalf("want approval, got pending: %s", why)
				}
				return
			}
			if msg != "" || !strings.Contains(why, tc.pendWhy) {
				t.Fatalf("want pending mentioning %q, got approval %q / reason %q", tc.pendWhy, msg, why)
			}
		})
	}
}
