package kubelet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestProjectedServiceAccountToken: a projected serviceAccountToken volume holds a token the API server
// authenticates as the pod's service account (403 for what the account may not do, not 401), and later
// syncs of the pod (a label change, which the same volume's downwardAPI file shows) keep that token
// instead of requesting a new one each time. The volume the ServiceAccount admission plugin adds gives
// the container, at /var/run/secrets/kubernetes.io/serviceaccount, a token for the same account, the
// cluster CA (ca.crt) and the pod's namespace, as client-go's in-cluster config reads them.
func TestProjectedServiceAccountToken(t *testing.T) {
	n := newNode(t, true)
	ctx := context.Background()
	if _, err := n.client.CoreV1().ServiceAccounts(testNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	n.start()
	pod := n.demoPod("token")
	exp := int64(3600)
	pod.Spec.ServiceAccountName = "app"
	pod.Spec.Volumes = []v1.Volume{{Name: "access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
		{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
	}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "access", MountPath: "/var/run/secrets/nodekit", ReadOnly: true}}
	n.create(pod)
	p := n.waitPod("token", 60*time.Second, "Running", running)
	cid := containerStatus(p, "demo").ContainerID
	token := n.exec(cid, "cat", "/var/run/secrets/nodekit/token")
	if strings.Count(token, ".") != 2 {
		t.Fatalf("token file holds %q, not a JWT", token)
	}
	cfg := rest.AnonymousClientConfig(n.api.Config)
	cfg.BearerToken = token
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(testNS).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:"+testNS+":app") {
		t.Fatalf("listing secrets with the pod's token: %v; want 403 Forbidden for system:serviceaccount:%s:app", err, testNS)
	}

	const inCluster = "/var/run/secrets/kubernetes.io/serviceaccount/"
	if ns := n.exec(cid, "cat", inCluster+"namespace"); ns != testNS {
		t.Errorf("%snamespace holds %q, want %q", inCluster, ns, testNS)
	}
	if ca := n.exec(cid, "cat", inCluster+"ca.crt"); strings.TrimSpace(ca) != strings.TrimSpace(string(n.api.Config.CAData)) || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Errorf("%sca.crt holds %q, want the cluster CA %q", inCluster, ca, n.api.Config.CAData)
	}
	cfg.BearerToken = n.exec(cid, "cat", inCluster+"token")
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(testNS).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:"+testNS+":app") {
		t.Fatalf("listing secrets with the token in %s: %v; want 403 Forbidden for system:serviceaccount:%s:app", inCluster, err, testNS)
	}

	patch := []byte(`{"metadata":{"labels":{"synced":"again"}}}`)
	if _, err := n.client.CoreV1().Pods(testNS).Patch(ctx, "token", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(n.exec(cid, "cat", "/var/run/secrets/nodekit/labels"), `synced="again"`) {
		if time.Now().After(deadline) {
			t.Fatal("the projected volume's labels file did not show the new label within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if again := n.exec(cid, "cat", "/var/run/secrets/nodekit/token"); again != token {
		t.Errorf("the pod's sync after the label change wrote a new token; want the first one reused")
	}
	n.deleteGracefully("token", 1) // the kubelet unmounts the volume before the data dir goes
	n.waitGone("token", 60*time.Second)
}
