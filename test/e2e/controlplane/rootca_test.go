package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/rootcacertpublisher"
)

// TestRootCAPublished: every namespace, the system ones and a new one, gets kube-root-ca.crt with a
// bundle that verifies the API server's serving certificate; a deleted or edited copy is restored, and
// a deleted namespace is not given a new one (its deletion completes).
func TestRootCAPublished(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	if len(c.Config.CAData) == 0 {
		t.Fatal("admin kubeconfig carries no CA data")
	}
	cms := func(ns string) func() error {
		return func() error {
			cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data[rootcacertpublisher.DataKey] != string(c.Config.CAData) {
				return fmt.Errorf("%s/%s: ca.crt is not the cluster CA: %q", ns, cm.Name, cm.Data[rootcacertpublisher.DataKey])
			}
			if cm.Annotations[rootcacertpublisher.DescriptionAnnotation] == "" {
				return fmt.Errorf("%s/%s: no %s annotation", ns, cm.Name, rootcacertpublisher.DescriptionAnnotation)
			}
			return nil
		}
	}
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		eventually(t, 30*time.Second, "kube-root-ca.crt in "+ns, cms(ns))
	}

	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rootca"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "kube-root-ca.crt in a new namespace", cms("rootca"))

	// The published bundle is what a pod's client would use: it must verify the serving certificate.
	cm, err := c.Client.CoreV1().ConfigMaps("rootca").Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[rootcacertpublisher.DataKey])) {
		t.Fatal("ca.crt holds no PEM certificate")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname()})
	if err != nil {
		t.Fatalf("the published CA does not verify the API server at %s: %v", c.URL, err)
	}
	conn.Close()

	if err := c.Client.CoreV1().ConfigMaps("rootca").Delete(ctx, rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "kube-root-ca.crt recreated after delete", cms("rootca"))

	cm, err = c.Client.CoreV1().ConfigMaps("rootca").Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[rootcacertpublisher.DataKey] = "edited"
	if _, err := c.Client.CoreV1().ConfigMaps("rootca").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "kube-root-ca.crt restored after edit", cms("rootca"))

	if err := c.Client.CoreV1().Namespaces().Delete(ctx, "rootca", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "namespace rootca deleted", func() error {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "rootca", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace rootca still exists")
	})
}
