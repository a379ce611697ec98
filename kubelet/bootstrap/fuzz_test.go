package bootstrap

import (
	"strings"
	"testing"
)

// FuzzConfig feeds arbitrary --token, --ca-hash and --server values to the join configuration check,
// the first thing `nodekit agent --token` does with them. Properties: it never panics; an error names
// the flag at fault and never echoes the token's secret; an accepted configuration has a bootstrap token,
// a sha256 pin of 64 hex digits and an https server, and both timeouts set.
func FuzzConfig(f *testing.F) {
	f.Add("abcdef.0123456789abcdef", "sha256:"+strings.Repeat("a", 64), "https://10.0.0.1:6443")
	f.Add("abcdef.0123456789abcdeg1", "SHA256:"+strings.Repeat("F", 64), "https://[::1]:6443/x")
	f.Add("abcdef0123456789abcdef", "sha256:"+strings.Repeat("a", 63), "http://x")
	f.Add("", "", "")
	f.Add("abcdef.0123456789abcdef", "sha256:"+strings.Repeat("a", 64)+"\n", "https://%zz")
	f.Fuzz(func(t *testing.T, token, caHash, server string) {
		c := Config{Token: token, CAHash: caHash, Server: server, NodeName: "n", Kubeconfig: "/tmp/k"}
		err := c.complete()
		_, secret, _ := strings.Cut(token, ".")
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--token: ") && !strings.HasPrefix(msg, "--ca-hash: ") && !strings.HasPrefix(msg, "--server: ") {
				t.Fatalf("error %q does not name the flag", msg)
			}
			if len(secret) >= 6 && strings.Contains(msg, secret) && !strings.Contains(caHash+server, secret) {
				t.Fatalf("error %q echoes the token secret", msg)
			}
			return
		}
		id, sec, ok := strings.Cut(token, ".")
		if !ok || len(id) != 6 || len(sec) != 16 || strings.Trim(token, "abcdefghijklmnopqrstuvwxyz0123456789.") != "" {
			t.Fatalf("token %q accepted", token)
		}
		if len(caHash) != len("sha256:")+64 || !strings.EqualFold(caHash[:7], "sha256:") || strings.Trim(strings.ToLower(caHash[7:]), "0123456789abcdef") != "" {
			t.Fatalf("ca-hash %q accepted", caHash)
		}
		if len(server) < 8 || !strings.EqualFold(server[:8], "https://") || c.DiscoveryTimeout <= 0 || c.CertificateTimeout <= 0 {
			t.Fatalf("server %q / timeouts %v %v accepted", server, c.DiscoveryTimeout, c.CertificateTimeout)
		}
	})
}
