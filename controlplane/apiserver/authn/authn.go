// Package authn builds the API server's request authenticator: x509 client certificates signed by the
// cluster CA (user = CN, groups = O, as Kubernetes defines for client certs), optionally a static
// token file (kube-apiserver's --token-auth-file CSV: token,user,uid[,"group1,group2"]), bearer tokens of
// other authenticators (service account tokens, bootstrap tokens). Authenticated users also get the
// system:authenticated group. A request carrying credentials that no authenticator accepts is 401; a
// request carrying none is the anonymous user (system:anonymous, group system:unauthenticated), as
// kube-apiserver's --anonymous-auth=true, and the authorizer decides what it may do.
package authn

import (
	"crypto/x509"
	"fmt"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
)

// New returns the authenticator for client certificates verified against clientCA, the bearer tokens in
// tokenFile (when not ""), bearer tokens any of tokens accepts (service account and bootstrap tokens),
// and anonymous requests.
func New(clientCA *x509.CertPool, tokenFile string, tokens ...authenticator.Token) (authenticator.Request, error) {
	opts := x509.VerifyOptions{Roots: clientCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	auths := []authenticator.Request{x509request.New(opts, x509request.CommonNameUserConversion)}
	if tokenFile != "" {
		static, err := tokenfile.NewCSV(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("authn: token file %s: %w", tokenFile, err)
		}
		auths = append(auths, bearertoken.New(static))
	}
	for _, t := range tokens {
		auths = append(auths, bearertoken.New(t))
	}
	// As kube-apiserver: credentials that fail (an unknown bearer token, an untrusted certificate) are
	// 401 and never fall through to anonymous; only a request with no credentials is anonymous.
	return union.NewFailOnError(group.NewAuthenticatedGroupAdder(union.New(auths...)), anonymous.NewAuthenticator(nil)), nil
}
