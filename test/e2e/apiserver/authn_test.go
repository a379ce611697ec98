package apiserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
	// the kubelet of node-a asks, with its node credentials (once the Node authorizer's graph has the pod)
	var tr *authenticationv1.TokenRequest
	eventually(t, "node-a requests a token for its pod", func() error {
		tr, err = s.NodeClient(t, "node-a").CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", req, metav1.CreateOptions{})
		return err
	})
	if tr.Status.Token == "" || time.Until(tr.Status.ExpirationTimestamp.Time) > 601*time.Second || time.Until(tr.Status.ExpirationTimestamp.Time) < 590*time.Second {
		t.Fatalf("token request status: %+v", tr.Status)
	}
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
