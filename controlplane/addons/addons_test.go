package addons

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/images/bundled"
)

func TestDNSServiceIP(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.96.0.0/12":   "10.96.0.10",
		"10.123.45.0/24": "10.123.45.10",
		"172.20.0.16/28": "172.20.0.26",
		"fd00:10::/108":  "fd00:10::a",
	} {
		ip, err := DNSServiceIP(cidr)
		if err != nil || ip.String() != want {
			t.Errorf("DNSServiceIP(%s) = %v, %v; want %s", cidr, ip, err, want)
		}
	}
	for _, bad := range []string{"10.96.0.0/29", "10.96.0.0", ""} {
		if ip, err := DNSServiceIP(bad); err == nil {
			t.Errorf("DNSServiceIP(%q) = %v, want an error", bad, ip)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Options{Disabled: []string{CoreDNS}}).Validate(); err != nil {
		t.Errorf("--disable coredns: %v", err)
	}
	err := Options{Disabled: []string{"traefik"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `--disable: unknown add-on "traefik" (known: coredns, local-storage, metrics)`) {
		t.Errorf("--disable traefik: %v", err)
	}
}

// withRBAC makes the fake API server serve rbac.authorization.k8s.io/v1.
func withRBAC(c *fake.Clientset) *fake.Clientset {
	c.Resources = []*metav1.APIResourceList{{GroupVersion: "rbac.authorization.k8s.io/v1"}}
	return c
}

// TestReconcileCoreDNS: the first reconcile creates the six objects with the desired state; a drifted
// Corefile, Deployment image and an extra label are put back (the label kept) by the next; a kube-dns
// at another address is replaced; disabling removes every object of the add-on but leaves an object of
// the same name that the add-on did not make.
func TestReconcileCoreDNS(t *testing.T) {
	ctx := context.Background()
	c := withRBAC(fake.NewClientset())
	o := Options{ServiceCIDR: "10.96.0.0/12"}
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 2 || svc.Spec.Selector["k8s-app"] != "kube-dns" || svc.Labels[LabelAddon] != CoreDNS {
		t.Errorf("kube-dns Service: %+v", svc)
	}
	dep, err := c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != "coredns" || pod.DNSPolicy != v1.DNSDefault || pod.Containers[0].Image != bundled.CoreDNS ||
		dep.Spec.Template.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("coredns Deployment: %+v", dep.Spec)
	}
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["Corefile"], "kubernetes cluster.local in-addr.arpa ip6.arpa {") {
		t.Errorf("Corefile:\n%s", cm.Data["Corefile"])
	}
	role, err := c.RbacV1().ClusterRoles().Get(ctx, "system:coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 2 || role.Rules[1].Resources[0] != "endpointslices" || strings.Join(role.Rules[0].Verbs, ",") != "list,watch" {
		t.Errorf("ClusterRole rules: %+v", role.Rules)
	}
	binding, err := c.RbacV1().ClusterRoleBindings().Get(ctx, "system:coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := binding.Subjects; len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Name != "coredns" || s[0].Namespace != "kube-system" ||
		binding.RoleRef.Name != "system:coredns" {
		t.Errorf("ClusterRoleBinding: %+v", binding)
	}
	if _, err := c.CoreV1().ServiceAccounts("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	// Drift, then a second server start.
	cm.Data["Corefile"] = "broken"
	cm.Labels["mine"] = "kept"
	if _, err := c.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Image = "example/other:1"
	if _, err := c.AppsV1().Deployments("kube-system").Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The service range changed: kube-dns moves to the new tenth address.
	o.ServiceCIDR = "10.100.0.0/16"
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	cm, _ = c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if cm.Data["Corefile"] != Corefile("cluster.local") || cm.Labels["mine"] != "kept" {
		t.Errorf("after reconcile: Corefile %q, labels %v", cm.Data["Corefile"], cm.Labels)
	}
	dep, _ = c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if dep.Spec.Template.Spec.Containers[0].Image != bundled.CoreDNS {
		t.Errorf("after reconcile: image %s", dep.Spec.Template.Spec.Containers[0].Image)
	}
	svc, _ = c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if svc.Spec.ClusterIP != "10.100.0.10" {
		t.Errorf("after the range changed: kube-dns at %s, want 10.100.0.10", svc.Spec.ClusterIP)
	}

	// Someone else's ServiceAccount named coredns is not the add-on's: disabling leaves it.
	sa, _ := c.CoreV1().ServiceAccounts("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	delete(sa.Labels, LabelAddon)
	if _, err := c.CoreV1().ServiceAccounts("kube-system").Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.Disabled = []string{CoreDNS}
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Service":            get(c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})),
		"Deployment":         get(c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})),
		"ConfigMap":          get(c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})),
		"ClusterRole":        get(c.RbacV1().ClusterRoles().Get(ctx, "system:coredns", metav1.GetOptions{})),
		"ClusterRoleBinding": get(c.RbacV1().ClusterRoleBindings().Get(ctx, "system:coredns", metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after --disable coredns: %v, want NotFound", what, err)
		}
	}
	if _, err := c.CoreV1().ServiceAccounts("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("a ServiceAccount coredns without the add-on's label was removed: %v", err)
	}
}

// TestReconcileWithoutRBAC: an API server that does not serve rbac.authorization.k8s.io gets every
// object but the ClusterRole and its binding.
func TestReconcileWithoutRBAC(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	if err := Reconcile(ctx, c, Options{ServiceCIDR: "10.96.0.0/12"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	for _, a := range c.Actions() {
		if a.GetResource().Group == "rbac.authorization.k8s.io" {
			t.Errorf("RBAC request to a server without RBAC: %v", a)
		}
	}
}

func get[T any](_ T, err error) error { return err }

// TestReconcileLocalStorage: the add-on creates the default StorageClass local-path; a class changed
// in an immutable field (reclaimPolicy) is replaced; disabling removes it.
func TestReconcileLocalStorage(t *testing.T) {
	ctx := context.Background()
	c := withRBAC(fake.NewClientset())
	o := Options{ServiceCIDR: "10.96.0.0/12", Disabled: []string{CoreDNS}}
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	sc, err := c.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Provisioner != "nodekit.io/local-path" || sc.Annotations[defaultClassAnnotation] != "true" ||
		*sc.VolumeBindingMode != "WaitForFirstConsumer" || *sc.ReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Fatalf("local-path = %+v", sc)
	}
	retain := v1.PersistentVolumeReclaimRetain
	sc.ReclaimPolicy = &retain
	if _, err := c.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	if sc, _ = c.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{}); *sc.ReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaimPolicy after reconcile = %s, want Delete", *sc.ReclaimPolicy)
	}
	o.Disabled = append(o.Disabled, LocalStorage)
	if err := Reconcile(ctx, c, o, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("local-path after --disable local-storage: %v, want NotFound", err)
	}
}
