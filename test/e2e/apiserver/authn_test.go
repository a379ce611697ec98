package apiserver_test

import (
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestAuthentication covers the static token file (a masters token works, an unknown token is 401, a
// token user without permissions is 403), anonymous requests (401) and the PKI file modes.
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
	if _, err := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(s.Config)).CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("anonymous: want 401, got %v", err)
	}
	for _, f := range []string{"pki/ca.key", "pki/apiserver.key", "pki/admin.key", "pki/apiserver-kubelet-client.key", "admin.kubeconfig"} {
		st, err := os.Stat(filepath.Join(s.DataDir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: want mode 0600, got %v %v", f, st.Mode(), err)
		}
	}
}
