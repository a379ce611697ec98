package apiserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/internal/podnet"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// forbidden fails the test unless err is a 403 whose message contains want.
func forbidden(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: want 403 containing %q, got %v", what, want, err)
	}
}

// eventually polls f (every 50 ms, up to 10 s: the Node authorizer's graph follows a pod informer)
// until it returns nil; it fails the test with f's last error.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	await(t, 10*time.Second, what, f)
}

// await polls f every 50 ms until it returns nil, failing the test with f's last error after timeout.
func await(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

func mirrorPod(name string, node *corev1.Node) *corev1.Pod {
	p := pod(name, node.Name)
	yes := true
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: &yes}}
	return p
}

// TestNodeAuthorizerAndRestriction drives a node's credentials against the Node authorizer and the
// NodeRestriction admission plugin on a real etcd and API server: mirror pods only, no references to
// API objects, no taint, restricted-label or ownerReference changes, secrets and configmaps only while a
// pod bound to the node refers to them, tokens only for pods bound to the node, its own Node and Lease
// only; wrong-node and anonymous requests are tried for each rule.
func TestNodeAuthorizerAndRestriction(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, admin := ctxT(t), s.Client
	a, b := s.NodeClient(t, "node-a"), s.NodeClient(t, "node-b")
	anon := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(s.Config))
	nodeA, err := a.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelHostname: "node-a"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node-a registers itself with a taint and a kubelet label: %v", err)
	}
	nodeB, err := b.CoreV1().Nodes().Create(ctx, nodeObj("node-b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NodeClient(t, "node-c").CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c",
		Labels: map[string]string{"node-restriction.kubernetes.io/pool": "secure"}}}, metav1.CreateOptions{})
	forbidden(t, "node registers with a node-restriction label", err, `node "node-c" is not allowed to set the following labels: node-restriction.kubernetes.io/pool`)

	// Nodes: own object only; no taint, restricted label or ownerReference changes.
	patch := func(c *kubernetes.Clientset, name, body string) error {
		_, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	forbidden(t, "node-a changes its taints", patch(a, "node-a", `{"spec":{"taints":null}}`), `node "node-a" is not allowed to modify taints`)
	forbidden(t, "node-a adds a node-restriction label", patch(a, "node-a", `{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"secure"}}}`),
		"is not allowed to modify labels: node-restriction.kubernetes.io/pool")
	forbidden(t, "node-a adds a kubernetes.io label outside the kubelet's set", patch(a, "node-a", `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`),
		"is not allowed to modify labels: node-role.kubernetes.io/control-plane")
	forbidden(t, "node-a sets ownerReferences", patch(a, "node-a", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"node-b","uid":"`+string(nodeB.UID)+`"}]}}`),
		`node "node-a" is not allowed to modify ownerReferences`)
	if err := patch(a, "node-a", `{"metadata":{"labels":{"zone":"a","`+corev1.LabelTopologyZone+`":"z1"}}}`); err != nil {
		t.Fatalf("node-a sets an unrestricted and a kubelet label: %v", err)
	}
	forbidden(t, "node-a patches node-b", patch(a, "node-b", `{"metadata":{"labels":{"x":"y"}}}`), `node "node-a" is not allowed to modify node "node-b"`)
	if err := patch(admin, "node-a", `{"spec":{"taints":null}}`); err != nil {
		t.Fatalf("the admin changes node-a's taints: %v", err)
	}
	// Reading other Nodes is granted by the bootstrap binding the host-gw route controller needs
	// (podnet.RouteReaderRole, docs/access-control.md); without it the Node authorizer alone answers, as
	// upstream's: its own Node only.
	if _, err := a.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{}); err != nil {
		t.Fatalf("node-a reads node-b through %s: %v", podnet.RouteReaderRole, err)
	}
	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, podnet.RouteReaderRole, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// the RBAC authorizer sees the deletion once its informer has it: await the refusal
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = a.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		return apierrors.IsForbidden(err), nil
	})
	forbidden(t, "node-a reads node-b", err, "node 'node-a' cannot read 'node-b', only its own Node object")
	_, err = a.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	forbidden(t, "node-a lists nodes", err, "cannot read all nodes")
	if _, err := a.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-a"}); err != nil {
		t.Fatalf("node-a lists itself: %v", err)
	}
	forbidden(t, "anonymous patches node-a", patch(anon, "node-a", `{"metadata":{"labels":{"x":"y"}}}`), "system:anonymous")

	// Pods: mirror pods only, bound to itself, owned by its Node, referencing no API object.
	for _, name := range []string{"used", "unused"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod := func(c *kubernetes.Clientset, p *corev1.Pod) error {
		_, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	forbidden(t, "node-a creates a plain pod", createPod(a, pod("plain", "node-a")),
		`pod does not have "kubernetes.io/config.mirror" annotation, node "node-a" can only create mirror pods`)
	withSecret := mirrorPod("with-secret", nodeA)
	withSecret.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "unused"}, Key: "k"}}}}
	forbidden(t, "node-a creates a mirror pod referencing a secret", createPod(a, withSecret), `node "node-a" can not create pods that reference secrets`)
	withVolume := mirrorPod("with-volume", nodeA)
	withVolume.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "unused"}}}}
	forbidden(t, "node-a creates a mirror pod mounting a secret", createPod(a, withVolume), `node "node-a" can not create pods that reference secrets`)
	withCM := mirrorPod("with-cm", nodeA)
	withCM.Spec.Volumes = []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}}}
	forbidden(t, "node-a creates a mirror pod projecting a configmap", createPod(a, withCM), `node "node-a" can not create pods that reference configmaps`)
	withSA := mirrorPod("with-sa", nodeA)
	withSA.Spec.ServiceAccountName = "default"
	// the ServiceAccount plugin, before NodeRestriction in kube-apiserver's order, refuses it first
	forbidden(t, "node-a creates a mirror pod with a service account", createPod(a, withSA), `a mirror pod may not reference service accounts`)
	withPVC := mirrorPod("with-pvc", nodeA)
	withPVC.Spec.Volumes = []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	forbidden(t, "node-a creates a mirror pod with a PVC", createPod(a, withPVC), `node "node-a" can not create pods that reference persistentvolumeclaims`)
	forbidden(t, "node-a creates a mirror pod bound to node-b", createPod(a, mirrorPod("other-node", nodeB)), `node "node-a" can only create pods with spec.nodeName set to itself`)
	notOwned := mirrorPod("not-owned", nodeA)
	notOwned.OwnerReferences = nil
	forbidden(t, "node-a creates a mirror pod without owner", createPod(a, notOwned), `node "node-a" can only create pods with an owner reference set to itself`)
	wrongUID := mirrorPod("wrong-uid", nodeA)
	wrongUID.OwnerReferences[0].UID = nodeB.UID
	forbidden(t, "node-a creates a mirror pod owned by another uid", createPod(a, wrongUID), "node node-a UID mismatch")
	if err := createPod(a, mirrorPod("static-web", nodeA)); err != nil {
		t.Fatalf("node-a creates a valid mirror pod: %v", err)
	}
	forbidden(t, "anonymous creates a pod", createPod(anon, pod("anon", "node-a")), "system:anonymous")

	// Secrets and configmaps: readable only while a pod bound to the node refers to them.
	getSecret := func(c *kubernetes.Clientset, name string) error {
		_, err := c.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
		return err
	}
	forbidden(t, "node-a gets a secret before any pod refers to it", getSecret(a, "used"), "no relationship found between node 'node-a' and this object")
	user := pod("uses-secret", "node-a")
	user.Spec.ServiceAccountName = "app"
	user.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "used"}}}}
	user.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	userPod, err := admin.CoreV1().Pods("default").Create(ctx, user, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a gets the secret its pod mounts", func() error { return getSecret(a, "used") })
	if _, err := a.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Fatalf("node-a gets the configmap its pod's env refers to: %v", err)
	}
	if _, err := a.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=used"}); err != nil {
		t.Fatalf("node-a lists the one secret by name: %v", err)
	}
	forbidden(t, "node-a gets an unreferenced secret", getSecret(a, "unused"), "no relationship found between node 'node-a'")
	forbidden(t, "node-b gets node-a's pod's secret", getSecret(b, "used"), "no relationship found between node 'node-b'")
	_, err = a.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	forbidden(t, "node-a lists secrets", err, "No Object name found")
	forbidden(t, "anonymous gets the secret", getSecret(anon, "used"), "system:anonymous")
	_, err = a.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
	forbidden(t, "node-a creates a secret", err, "can only read resources of this type")

	// Pods: get and list only its own.
	if _, err := a.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"}); err != nil {
		t.Fatalf("node-a lists its pods: %v", err)
	}
	_, err = a.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	forbidden(t, "node-a lists all pods", err, "can only list/watch pods with spec.nodeName field selector")
	_, err = a.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-b"})
	forbidden(t, "node-a lists node-b's pods", err, "can only list/watch pods with spec.nodeName field selector")
	otherPod, err := admin.CoreV1().Pods("default").Create(ctx, func() *corev1.Pod { p := pod("on-b", "node-b"); p.Spec.ServiceAccountName = "app"; return p }(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-b gets its pod", func() error {
		_, err := b.CoreV1().Pods("default").Get(ctx, "on-b", metav1.GetOptions{})
		return err
	})
	_, err = a.CoreV1().Pods("default").Get(ctx, "on-b", metav1.GetOptions{})
	forbidden(t, "node-a gets node-b's pod", err, "no relationship found between node 'node-a'")
	status := []byte(`{"status":{"phase":"Running"}}`)
	_, err = a.CoreV1().Pods("default").Patch(ctx, "on-b", types.MergePatchType, status, metav1.PatchOptions{}, "status")
	forbidden(t, "node-a patches node-b's pod status", err, `node "node-a" can only update pod status for pods with spec.nodeName set to itself`)
	if _, err := a.CoreV1().Pods("default").Patch(ctx, "uses-secret", types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("node-a patches its pod's status: %v", err)
	}
	err = a.CoreV1().Pods("default").Delete(ctx, "on-b", metav1.DeleteOptions{})
	forbidden(t, "node-a deletes node-b's pod", err, `node "node-a" can only delete pods with spec.nodeName set to itself`)

	// Tokens: only bound to a pod on the node, for the service account such a pod uses.
	token := func(c *kubernetes.Clientset, sa string, p *corev1.Pod) error {
		req := &authenticationv1.TokenRequest{}
		if p != nil {
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
		}
		_, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, req, metav1.CreateOptions{})
		return err
	}
	if err := token(a, "app", userPod); err != nil {
		t.Fatalf("node-a requests a token for its pod: %v", err)
	}
	forbidden(t, "node-a requests a token bound to node-b's pod", token(a, "app", otherPod), "node requested token bound to a pod scheduled on a different node")
	forbidden(t, "node-a requests an unbound token", token(a, "app", nil), "node requested token not bound to a pod")
	forbidden(t, "node-a requests a token for a service account none of its pods uses", token(a, "default", userPod), "no relationship found between node 'node-a'")
	forbidden(t, "anonymous requests a token", token(anon, "app", userPod), "system:anonymous")

	// Leases: its own in kube-node-lease only.
	if _, err := a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node-a creates its lease: %v", err)
	}
	_, err = a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, metav1.CreateOptions{})
	forbidden(t, "node-a creates node-b's lease", err, "can only access node lease with the same name as the requesting node")
	_, err = b.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
	forbidden(t, "node-b reads node-a's lease", err, "can only access node lease with the same name as the requesting node")
	_, err = a.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	forbidden(t, "node-a creates a lease outside kube-node-lease", err, `can only access leases in the "kube-node-lease" system namespace`)

	// The reference ends with the pod.
	if err := admin.CoreV1().Pods("default").Delete(ctx, "uses-secret", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a loses the secret with its pod", func() error {
		err := getSecret(a, "used")
		if err == nil {
			return errors.New("node-a still gets the secret")
		}
		if !apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
}
