package apiserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jose "gopkg.in/go-jose/go-jose.v2"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/server"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestAuthentication covers the static token file (a masters token works, an unknown token is 401, a
// token user without permissions is 403), anonymous requests (authenticated as system:anonymous, so
// 403 outside what anonymous may read, as kube-apiserver with --anonymous-auth) and the PKI file modes.
func TestAuthentication(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("admintoken,alice,1,\"system:masters\"\nplaintoken,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := fw.Start(t, fw.Options{TokenFile: tokens})
	ctx := ctxT(t)
	withToken := func(tok string) *kubernetes.Clientset {
		cfg := rest.AnonymousClientConfig(s.Config)
		cfg.BearerToken = tok
		return kubernetes.NewForConfigOrDie(cfg)
	}
	if _, err := withToken("admintoken").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("masters token: %v", err)
	}
	if _, err := withToken("wrong").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("unknown token: want 401, got %v", err)
	}
	if _, err := withToken("plaintoken").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("user without permissions: want 403, got %v", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(s.Config)).CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "system:anonymous") {
		t.Fatalf("anonymous: want 403 for system:anonymous, got %v", err)
	}
	p := server.Config{DataDir: s.DataDir}.Paths()
	for _, f := range []string{pki.KeyPath(p.PKIDir, pki.CAName), pki.KeyPath(p.PKIDir, "apiserver"), pki.KeyPath(p.PKIDir, "admin"),
		pki.KeyPath(p.PKIDir, "apiserver-kubelet-client"), p.AdminKubeconfig} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: want mode 0600, got %v %v", f, st.Mode(), err)
		}
	}
}

// TestServiceAccountTokens requests a pod-bound token through serviceaccounts/token (as a kubelet does
// for projected volumes) and authenticates with it: the API server knows it as the service account
// (403 without permissions, not 401), while a tampered token is 401, and so is a token whose bound pod or
// service account was deleted or recreated.
func TestServiceAccountTokens(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	_, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := pod("tok", "node-a")
	bound.Spec.ServiceAccountName = "app"
	p, err := c.CoreV1().Pods("default").Create(ctx, bound, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	// the kubelet of node-a asks, with its node credentials (once the Node authorizer's graph has the pod)
	var tr *authenticationv1.TokenRequest
	eventually(t, "node-a requests a token for its pod", func() error {
		tr, err = s.NodeClient(t, "node-a").CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", req, metav1.CreateOptions{})
		return err
	})
	if tr.Status.Token == "" || time.Until(tr.Status.ExpirationTimestamp.Time) > 601*time.Second || time.Until(tr.Status.ExpirationTimestamp.Time) < 590*time.Second {
		t.Fatalf("token request status: %+v", tr.Status)
	}
	// TokenReview: the service account, with upstream's extra items (conformance "should mount an API
	// token into pods"): credential-id JTI=<jti>, the bound pod and its node.
	review, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := review.Status.User.Extra
	one := func(key, want string) {
		if v := extra["authentication.kubernetes.io/"+key]; len(v) != 1 || (want != "" && v[0] != want) || (key == "credential-id" && !strings.HasPrefix(v[0], "JTI=")) {
			t.Errorf("token review extra %s = %v, want [%s]", key, v, want)
		}
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:default:app" {
		t.Fatalf("token review status %+v", review.Status)
	}
	one("credential-id", "")
	one("pod-name", p.Name)
	one("pod-uid", string(p.UID))
	one("node-name", "node-a")
	one("node-uid", string(node.UID))
	short := int64(60)
	if _, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("60s token: want 422, got %v", err)
	}
	if _, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "missing", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("token for a missing service account: want 404, got %v", err)
	}
	withToken := func(tok string) *kubernetes.Clientset {
		cfg := rest.AnonymousClientConfig(s.Config)
		cfg.BearerToken = tok
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// OpenID discovery of the issuer (conformance "should support OIDC discovery of service account
	// issuer"): the service account itself reads the configuration and the key set, and the token's
	// signature verifies with the key its kid names.
	oidc := withToken(tr.Status.Token).CoreV1().RESTClient()
	raw, err := oidc.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		t.Fatalf("openid-configuration: %v", err)
	}
	var disc struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.Unmarshal(raw, &disc); err != nil || disc.Issuer != "https://kubernetes.default.svc.cluster.local" ||
		!strings.HasSuffix(disc.JWKSURI, "/openid/v1/jwks") || !slices.Equal(disc.Algs, []string{"ES256"}) {
		t.Fatalf("openid-configuration %s (%v)", raw, err)
	}
	raw, err = oidc.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		t.Fatalf("jwks: %v", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s (%v)", raw, err)
	}
	sig, err := jose.ParseSigned(tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	if kid := sig.Signatures[0].Header.KeyID; kid == "" || kid != set.Keys[0].KeyID {
		t.Fatalf("token kid %q, key set kid %q", kid, set.Keys[0].KeyID)
	}
	if _, err := sig.Verify(set.Keys[0].Key); err != nil {
		t.Fatalf("token does not verify with the served key: %v", err)
	}
	_, err = withToken(tr.Status.Token).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:default:app") {
		t.Fatalf("service account token: want 403 naming system:serviceaccount:default:app, got %v", err)
	}
	tampered := tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"
	if _, err := withToken(tampered).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("tampered token: want 401, got %v", err)
	}

	// A token outlives neither its bound pod nor its service account (nor a recreated one).
	unbound, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := func(tok string) error {
		_, err := withToken(tok).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err
	}
	if err := list(unbound.Status.Token); !apierrors.IsForbidden(err) {
		t.Fatalf("unbound token of a live service account: want 403, got %v", err)
	}
	if err := c.CoreV1().Pods("default").Delete(ctx, "tok", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	if err := list(tr.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token bound to a deleted pod: want 401, got %v", err)
	}
	if err := list(unbound.Status.Token); !apierrors.IsForbidden(err) {
		t.Fatalf("unbound token after the pod's deletion: want 403, got %v", err)
	}
	if err := c.CoreV1().ServiceAccounts("default").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := list(unbound.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token of a deleted service account: want 401, got %v", err)
	}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := list(unbound.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token of a service account recreated under the same name: want 401, got %v", err)
	}
}
