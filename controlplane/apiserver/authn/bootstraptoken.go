package authn

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecret "k8s.io/cluster-bootstrap/util/secrets"
	bootstraptokens "k8s.io/cluster-bootstrap/util/tokens"
)

// SecretGetter reads the Secret name in kube-system, from the API server's own storage (its watch
// cache), never through a client of the API server itself. A missing Secret is a NotFound error.
type SecretGetter func(ctx context.Context, name string) (*corev1.Secret, error)

// BootstrapTokens authenticates Kubernetes bootstrap tokens (kubeadm's join tokens): a bearer token
// "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16}) matches the Secret kube-system/bootstrap-token-<id> of type
// bootstrap.kubernetes.io/token whose token-id and token-secret equal it (compared in constant time),
// which is not being deleted, has not expired (the expiration key, RFC 3339) and has
// usage-bootstrap-authentication "true". It authenticates as user system:bootstrap:<id> with groups
// system:bootstrappers plus the Secret's auth-extra-groups (each system:bootstrappers:...). Anything
// else is not this authenticator's token.
type BootstrapTokens struct {
	Secrets SecretGetter
	// Now is the clock for expiry (default time.Now).
	Now func() time.Time
}

// AuthenticateToken implements authenticator.Token.
func (b BootstrapTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	id, secret, err := bootstraptokens.ParseToken(token)
	if err != nil {
		return nil, false, nil // not a bootstrap token
	}
	name := bootstrapapi.BootstrapTokenSecretPrefix + id
	s, err := b.Secrets(ctx, name)
	if apierrors.IsNotFound(err) {
		slog.Debug("bootstrap token: no secret", "secret", name)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	reject := func(why string) (*authenticator.Response, bool, error) {
		slog.Debug("bootstrap token rejected", "secret", name, "reason", why)
		return nil, false, nil
	}
	switch {
	case s.DeletionTimestamp != nil:
		return reject("secret is being deleted")
	case s.Type != bootstrapapi.SecretTypeBootstrapToken || s.Data == nil:
		return reject("secret type is not " + string(bootstrapapi.SecretTypeBootstrapToken))
	case subtle.ConstantTimeCompare([]byte(bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenSecretKey)), []byte(secret)) != 1:
		return reject("token-secret does not match")
	case bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenIDKey) != id:
		return reject("token-id does not match the secret's name")
	}
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	if bootstrapsecret.HasExpired(s, now()) {
		return reject("expired")
	}
	if bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenUsageAuthentication) != "true" {
		return reject(bootstrapapi.BootstrapTokenUsageAuthentication + " is not true")
	}
	groups, err := bootstrapsecret.GetGroups(s)
	if err != nil {
		return reject("auth-extra-groups: " + err.Error())
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: bootstrapapi.BootstrapUserPrefix + id, Groups: groups}}, true, nil
}
