package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// TestFresh: a stored certificate is reused only for the same node and names, and only while more
// than a fifth of its lifetime is left.
func TestFresh(t *testing.T) {
	now := time.Now()
	leaf := func(cn string, dns []string, ips []net.IP, from, to time.Time) tls.Certificate {
		return tls.Certificate{Leaf: &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
			DNSNames: dns, IPAddresses: ips, NotBefore: from, NotAfter: to}}
	}
	c := Config{NodeName: "n1", DNSNames: []string{"n1"}, IPs: []net.IP{net.IPv4(10, 0, 0, 1)}}
	good := leaf("system:node:n1", c.DNSNames, c.IPs, now.Add(-time.Hour), now.Add(99*time.Hour))
	for name, tc := range map[string]struct {
		pair tls.Certificate
		want bool
	}{
		"same names, young":      {good, true},
		"nearly expired":         {leaf("system:node:n1", c.DNSNames, c.IPs, now.Add(-90*time.Hour), now.Add(10*time.Hour)), false},
		"other node":             {leaf("system:node:n2", c.DNSNames, c.IPs, now.Add(-time.Hour), now.Add(99*time.Hour)), false},
		"IP changed":             {leaf("system:node:n1", c.DNSNames, []net.IP{net.IPv4(10, 0, 0, 2)}, now.Add(-time.Hour), now.Add(99*time.Hour)), false},
		"name missing":           {leaf("system:node:n1", nil, c.IPs, now.Add(-time.Hour), now.Add(99*time.Hour)), false},
		"not yet valid":          {leaf("system:node:n1", c.DNSNames, c.IPs, now.Add(time.Hour), now.Add(99*time.Hour)), false},
		"no parsed leaf at hand": {tls.Certificate{}, false},
	} {
		if got := fresh(tc.pair, c, now); got != tc.want {
			t.Errorf("%s: fresh = %v, want %v", name, got, tc.want)
		}
	}
}
