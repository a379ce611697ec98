package authn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	tokenID     = "abcdef"
	tokenSecret = "0123456789abcdef"
	token       = tokenID + "." + tokenSecret
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func tokenSecretObj(mutate func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID, Namespace: "kube-system"},
		Type:       "bootstrap.kubernetes.io/token",
		Data: map[string][]byte{
			"token-id": []byte(tokenID), "token-secret": []byte(tokenSecret),
			"expiration":                     []byte(now.Add(time.Hour).Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"auth-extra-groups":              []byte("system:bootstrappers:nodekit:default-node-token"),
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func getter(secrets ...*corev1.Secret) SecretGetter {
	return func(_ context.Context, name string) (*corev1.Secret, error) {
		for _, s := range secrets {
			if s.Name == name {
				return s, nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
}

// TestBootstrapTokens covers token parsing and every rejection of the bootstrap token authenticator.
func TestBootstrapTokens(t *testing.T) {
	auth := func(tok string, s *corev1.Secret) (string, []string, bool) {
		t.Helper()
		resp, ok, err := BootstrapTokens{Secrets: getter(s), Now: func() time.Time { return now }}.AuthenticateToken(context.Background(), tok)
		if err != nil {
			t.Fatalf("%s: unexpected error %v", tok, err)
		}
		if !ok {
			return "", nil, false
		}
		return resp.User.GetName(), resp.User.GetGroups(), true
	}
	name, groups, ok := auth(token, tokenSecretObj(nil))
	if !ok || name != "system:bootstrap:"+tokenID || !slices.Equal(groups, []string{"system:bootstrappers", "system:bootstrappers:nodekit:default-node-token"}) {
		t.Fatalf("valid token: got %q %v %v", name, groups, ok)
	}
	if _, _, ok := auth(token, tokenSecretObj(func(s *corev1.Secret) { delete(s.Data, "expiration") })); !ok {
		t.Fatal("a token without expiration must authenticate")
	}
	for _, tc := range []struct {
		what  string
		token string
		edit  func(*corev1.Secret)
	}{
		{"wrong secret", tokenID + ".0123456789abcdeX", nil},
		{"wrong secret, same length", tokenID + ".fedcba9876543210", nil},
		{"unknown id", "zzzzzz." + tokenSecret, nil},
		{"not a token: upper case", "ABCDEF." + tokenSecret, nil},
		{"not a token: short secret", tokenID + ".0123", nil},
		{"not a token: no dot", tokenID + tokenSecret, nil},
		{"expired", token, func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(-time.Second).Format(time.RFC3339)) }},
		{"unparseable expiration", token, func(s *corev1.Secret) { s.Data["expiration"] = []byte("tomorrow") }},
		{"no authentication usage", token, func(s *corev1.Secret) { delete(s.Data, "usage-bootstrap-authentication") }},
		{"authentication usage false", token, func(s *corev1.Secret) { s.Data["usage-bootstrap-authentication"] = []byte("false") }},
		{"wrong type", token, func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }},
		{"token-id differs from name", token, func(s *corev1.Secret) { s.Data["token-id"] = []byte("zzzzzz") }},
		{"being deleted", token, func(s *corev1.Secret) { s.DeletionTimestamp = &metav1.Time{Time: now} }},
		{"bad extra group", token, func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:masters") }},
	} {
		if name, groups, ok := auth(tc.token, tokenSecretObj(tc.edit)); ok {
			t.Errorf("%s: authenticated as %s %v", tc.what, name, groups)
		}
	}
	// A storage failure is an error (401 with a cause), not a silent pass.
	failing := BootstrapTokens{Secrets: func(context.Context, string) (*corev1.Secret, error) { return nil, errors.New("etcd down") }}
	if _, ok, err := failing.AuthenticateToken(context.Background(), token); ok || err == nil {
		t.Fatalf("storage error: ok=%v err=%v", ok, err)
	}
}
