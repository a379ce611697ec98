package server

import (
	"crypto/x509"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
)

// Upstream's KubeletConfiguration defaults for webhook authentication and authorization.
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
)

// WebhookOptions configure Webhook; zero TTLs take upstream's defaults.
type WebhookOptions struct {
	// ClientCA verifies client certificates (authentication.x509.clientCAFile). Required.
	ClientCA *x509.CertPool
	// TokenCacheTTL caches TokenReview answers (authentication.webhook.cacheTTL, default 2 min).
	TokenCacheTTL time.Duration
	// AuthorizedTTL and UnauthorizedTTL cache SubjectAccessReview answers
	// (authorization.webhook.cacheAuthorizedTTL/cacheUnauthorizedTTL, default 5 min and 30 s).
	AuthorizedTTL, UnauthorizedTTL time.Duration
}

// Webhook returns upstream's kubelet webhook-mode authenticator and authorizer over client, built from
// k8s.io/apiserver's delegating factories: client certificates against o.ClientCA, or bearer tokens
// reviewed by the API server (TokenReview); and a SubjectAccessReview per request attributes. Answers are
// cached for the TTLs; failed calls to the API server are retried with backoff and then fail the request.
func Webhook(client kubernetes.Interface, o WebhookOptions) (authenticator.Request, authorizer.Authorizer, error) {
	if o.ClientCA == nil {
		return nil, nil, fmt.Errorf("kubelet server: webhook authentication needs the client CA")
	}
	if o.TokenCacheTTL == 0 {
		o.TokenCacheTTL = DefaultTokenCacheTTL
	}
	if o.AuthorizedTTL == 0 {
		o.AuthorizedTTL = DefaultAuthorizedCacheTTL
	}
	if o.UnauthorizedTTL == 0 {
		o.UnauthorizedTTL = DefaultUnauthorizedCacheTTL
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	tokens, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 o.TokenCacheTTL,
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet server: token authentication: %w", err)
	}
	certs := x509request.New(x509.VerifyOptions{Roots: o.ClientCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		x509request.CommonNameUserConversion)
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             o.AuthorizedTTL,
		DenyCacheTTL:              o.UnauthorizedTTL,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet server: webhook authorization: %w", err)
	}
	return group.NewAuthenticatedGroupAdder(union.New(certs, tokens)), authz, nil
}
