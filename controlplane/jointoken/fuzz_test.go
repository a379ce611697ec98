package jointoken

import (
	"strings"
	"testing"
	"time"

	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// secretLike reports whether s is long and mixed enough that finding it in an error message means the
// message echoes it (rather than s being a word of the message's own text).
func secretLike(s string) bool {
	return len(s) >= 6 && strings.ContainsAny(s, "0123456789") && strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz")
}

// FuzzSecret feeds arbitrary tokens and options to Secret (the `nodekit token create --token` parser) and
// tokenID (`nodekit token delete`'s). Properties: they never panic; no error echoes the token's secret part;
// an accepted token is stored as its id and secret, under bootstrap-token-<id>, and its id is what tokenID
// returns for it.
func FuzzSecret(f *testing.F) {
	for _, s := range []string{"abcdef.0123456789abcdef", "abcdef.0123456789ABCDEF", "abcde.0123456789abcdef1", "abcdef", "abcdef.", ".0123456789abcdef", "", "abcdef.0123456789abcdef.x"} {
		f.Add(s, "desc", int64(time.Hour), "system:bootstrappers:x")
	}
	f.Fuzz(func(t *testing.T, tok, desc string, ttl int64, group string) {
		_, secret, _ := strings.Cut(tok, ".")
		leaks := func(err error) bool { return err != nil && secretLike(secret) && strings.Contains(err.Error(), secret) }
		id, idErr := tokenID(tok)
		if leaks(idErr) {
			t.Fatalf("tokenID(%q) error echoes the secret: %v", tok, idErr)
		}
		if tok == "" {
			return // Secret generates a random token
		}
		s, err := Secret(Options{Token: tok, Description: desc, TTL: time.Duration(ttl), Groups: []string{group},
			Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
		if err != nil {
			if leaks(err) {
				t.Fatalf("Secret(%q) error echoes the secret: %v", tok, err)
			}
			return
		}
		if idErr != nil {
			t.Fatalf("token %q accepted by Secret, its id refused by tokenID: %v", tok, idErr)
		}
		got := string(s.Data[bootstrapapi.BootstrapTokenIDKey]) + "." + string(s.Data[bootstrapapi.BootstrapTokenSecretKey])
		if got != tok || s.Name != "bootstrap-token-"+id || s.Type != bootstrapapi.SecretTypeBootstrapToken {
			t.Fatalf("token %q stored as %q in %s (%s)", tok, got, s.Name, s.Type)
		}
		if exp, ok := s.Data[bootstrapapi.BootstrapTokenExpirationKey]; ok != (ttl > 0) {
			t.Fatalf("ttl %v: expiration %q", time.Duration(ttl), exp)
		}
	})
}
