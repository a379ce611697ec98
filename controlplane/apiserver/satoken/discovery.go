package satoken

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"

	jose "gopkg.in/go-jose/go-jose.v2"
)

// OpenID discovery of the service account issuer (upstream's ServiceAccountIssuerDiscovery, as
// kube-apiserver serves it): external systems and workloads verify service account tokens offline from
// the issuer's OpenID Provider configuration and its JSON Web Key Set.
const (
	// OpenIDConfigurationPath serves the OpenID Provider configuration.
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	// JWKSPath serves the key set.
	JWKSPath = "/openid/v1/jwks"
)

// KeyID is the kid of the signing key: the unpadded base64url SHA-256 of its public key's PKIX DER, as
// kube-apiserver computes it; issued tokens carry it in their header.
func (i *Issuer) KeyID() string {
	der, err := x509.MarshalPKIXPublicKey(&i.key.PublicKey)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// OpenIDConfiguration returns the OpenID Provider configuration document (JSON) naming the issuer and
// jwksURI (https://<external address>/openid/v1/jwks by default, as kube-apiserver), with the fields
// kube-apiserver serves: response_types_supported id_token, subject_types_supported public,
// id_token_signing_alg_values_supported ES256.
func (i *Issuer) OpenIDConfiguration(jwksURI string) ([]byte, error) {
	return json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	}{i.Issuer, jwksURI, []string{"id_token"}, []string{"public"}, []string{"ES256"}})
}

// JWKS returns the JSON Web Key Set (RFC 7517) of the public signing key: one EC P-256 key, use sig,
// alg ES256, kid KeyID.
func (i *Issuer) JWKS() ([]byte, error) {
	return json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: i.KeyID(), Algorithm: "ES256", Use: "sig"}}})
}

// DiscoveryHandlers returns the handlers of OpenIDConfigurationPath and JWKSPath: GET of a fixed
// document, with kube-apiserver's content types and a one-hour public cache lifetime. Authorization is
// the API server's (nonResourceURLs; system:service-account-issuer-discovery grants them).
func (i *Issuer) DiscoveryHandlers(jwksURI string) (map[string]http.Handler, error) {
	cfg, err := i.OpenIDConfiguration(jwksURI)
	if err != nil {
		return nil, err
	}
	keys, err := i.JWKS()
	if err != nil {
		return nil, err
	}
	serve := func(body []byte, contentType string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				w.Header().Set("Allow", http.MethodGet)
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "public, max-age=3600")
			_, _ = w.Write(body)
		})
	}
	return map[string]http.Handler{
		OpenIDConfigurationPath: serve(cfg, "application/json"),
		JWKSPath:                serve(keys, "application/jwk-set+json"),
	}, nil
}
