package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// widgetCRD is a namespaced CRD with a structural schema (bounds, an enum, a default), the status and
// scale subresources and printer columns.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	props := func(m map[string]apiextensionsv1.JSONSchemaProps) map[string]apiextensionsv1.JSONSchemaProps {
		return m
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: props(map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Description: "Spec is the widget's desired state.",
							XValidations: apiextensionsv1.ValidationRules{{Rule: "self.color == 'blue' || self.size <= 5", Message: "red widgets are at most 5"}},
							Properties: props(map[string]apiextensionsv1.JSONSchemaProps{
								"size":     {Type: "integer", Minimum: ptr.To(1.0), Maximum: ptr.To(10.0), Description: "Size of the widget, 1 to 10."},
								"color":    {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"blue"`)}, {Raw: []byte(`"red"`)}}, Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}},
								"replicas": {Type: "integer"},
							})},
						"status": {Type: "object", Properties: props(map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer"},
							"selector": {Type: "string"},
							"phase":    {Type: "string"},
						})},
					}),
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{
						SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector")},
				},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
					{Name: "Color", Type: "string", JSONPath: ".spec.color"},
				},
			}},
		},
	}
}

func widget(name string, size int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"size": size, "replicas": int64(1)},
	}}
}

// TestCustomResourceDefinitions drives a CRD through the real API server and etcd: it becomes
// Established and is listed in both discovery forms; its custom objects are validated against the
// structural schema (422 naming the field), defaulted, created, read, listed, watched, printed by
// `kubectl get` with the CRD's columns and explained by `kubectl explain`; the status and scale
// subresources act on their fields only; deleting a namespace (with the namespace controller running)
// removes the custom objects in it; deleting the CRD removes its remaining objects from etcd.
func TestCustomResourceDefinitions(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	ext := apiextensionsclient.NewForConfigOrDie(s.Config)
	dyn := dynamic.NewForConfigOrDie(s.Config)
	cli := s.Etcd(t)

	// the namespace, garbage collector and ClusterRole aggregation controllers, as the controller
	// manager runs them (its own identity and RBAC)
	cmCtx, cmCancel := context.WithCancel(context.Background())
	cmDone := make(chan error, 1)
	cmConfig := s.ControllerManagerConfig(t)
	go func() {
		cmDone <- controllers.Run(cmCtx, s.ControllerManagerClient(t), controllers.Options{
			Controllers: []string{controllers.Namespace, controllers.GarbageCollector, controllers.ClusterRoleAggregation}, Metadata: metadata.NewForConfigOrDie(cmConfig)})
	}()
	t.Cleanup(func() {
		cmCancel()
		if err := <-cmDone; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})

	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, 30*time.Second, "CRD Established", func() error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", crd.Status.Conditions)
	})
	if n := etcdCount(t, cli, "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"); n != 1 {
		t.Fatalf("etcd holds %d keys for the CRD, want 1", n)
	}

	t.Run("discovery", func(t *testing.T) {
		var groups metav1.APIGroupList
		rc := s.Client.Discovery().RESTClient()
		await(t, 10*time.Second, "example.com in /apis", func() error {
			if err := rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json").Do(ctx).Into(&groups); err != nil {
				return err
			}
			for _, g := range groups.Groups {
				if g.Name == "example.com" && g.PreferredVersion.GroupVersion == "example.com/v1" {
					return nil
				}
			}
			return fmt.Errorf("/apis lists %d groups, not example.com", len(groups.Groups))
		})
		for _, g := range []string{"example.com", "apiextensions.k8s.io"} {
			var group metav1.APIGroup
			if err := rc.Get().AbsPath("/apis/" + g).Do(ctx).Into(&group); err != nil {
				t.Fatal(err)
			}
			if group.Name != g || group.PreferredVersion.Version != "v1" {
				t.Fatalf("/apis/%s: %+v", g, group)
			}
		}
		var list metav1.APIResourceList
		if err := rc.Get().AbsPath("/apis/example.com/v1").Do(ctx).Into(&list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range list.APIResources {
			names = append(names, r.Name)
		}
		for _, want := range []string{"widgets", "widgets/status", "widgets/scale"} {
			if !slices.Contains(names, want) {
				t.Fatalf("/apis/example.com/v1 lists %v, not %s", names, want)
			}
		}
		// client-go reads the aggregated document (apidiscovery.k8s.io/v2), as kubectl does
		_, resources, err := s.Client.Discovery().ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rl := range resources {
			for _, r := range rl.APIResources {
				found = found || (rl.GroupVersion == "example.com/v1" && r.Name == "widgets" && r.Namespaced && r.Kind == "Widget" && slices.Contains(r.ShortNames, "wd"))
			}
		}
		if !found {
			t.Fatal("aggregated discovery does not list example.com/v1 widgets")
		}
	})

	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crd"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wi := dyn.Resource(widgets).Namespace("crd")

	t.Run("validation, defaulting, CRUD and watch", func(t *testing.T) {
		w, err := wi.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created, err := wi.Create(ctx, widget("a", 3), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c, _, _ := unstructured.NestedString(created.Object, "spec", "color"); c != "blue" {
			t.Fatalf("spec.color defaulted to %q, want blue", c)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "a" {
				t.Fatalf("watch event %s %v", ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event for the created widget")
		}
		got, err := wi.Get(ctx, "a", metav1.GetOptions{})
		if err != nil || got.GetUID() != created.GetUID() {
			t.Fatalf("get: %v %v", got, err)
		}
		if n := etcdCount(t, cli, "/registry/example.com/widgets/crd/a"); n != 1 {
			t.Fatalf("etcd holds %d keys for the widget, want 1", n)
		}

		_, err = wi.Create(ctx, widget("too-big", 20), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.size") {
			t.Fatalf("a widget with spec.size 20: %v, want 422 naming spec.size", err)
		}
		t.Logf("schema: %v", err)
		bad := widget("bad-color", 2)
		_ = unstructured.SetNestedField(bad.Object, "green", "spec", "color")
		_, err = wi.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.color") {
			t.Fatalf("a widget with spec.color green: %v, want 422 naming spec.color", err)
		}
		red := widget("big-red", 7)
		_ = unstructured.SetNestedField(red.Object, "red", "spec", "color")
		_, err = wi.Create(ctx, red, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "red widgets are at most 5") {
			t.Fatalf("a widget breaking the CEL rule: %v, want 422 with the rule's message", err)
		}
		t.Logf("CEL rule: %v", err)
		if _, err := wi.Create(ctx, widget("b", 5), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l, err := wi.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		if !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("list: %v, want [a b]", names)
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		got, err := wi.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(got.Object, "Ready", "status", "phase")
		_ = unstructured.SetNestedField(got.Object, int64(9), "spec", "size")
		upd, err := wi.UpdateStatus(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		phase, _, _ := unstructured.NestedString(upd.Object, "status", "phase")
		size, _, _ := unstructured.NestedInt64(upd.Object, "spec", "size")
		if phase != "Ready" || size != 3 {
			t.Fatalf("after a status update: status.phase %q (want Ready), spec.size %d (want 3, unchanged)", phase, size)
		}
		_ = unstructured.SetNestedField(upd.Object, "Gone", "status", "phase")
		_ = unstructured.SetNestedField(upd.Object, int64(4), "spec", "size")
		upd, err = wi.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		phase, _, _ = unstructured.NestedString(upd.Object, "status", "phase")
		size, _, _ = unstructured.NestedInt64(upd.Object, "spec", "size")
		if phase != "Ready" || size != 4 {
			t.Fatalf("after a main update: status.phase %q (want Ready, unchanged), spec.size %d (want 4)", phase, size)
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		status := `{"status":{"replicas":1,"selector":"app=a"}}`
		if _, err := wi.Patch(ctx, "a", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		scale, err := s.Client.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/namespaces/crd/widgets/a/scale").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"kind":"Scale"`, `"replicas":1`, `"selector":"app=a"`} {
			if !strings.Contains(string(scale), want) {
				t.Fatalf("GET scale lacks %s: %s", want, scale)
			}
		}
		if _, err := wi.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
			t.Fatal(err)
		}
		got, err := wi.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
			t.Fatalf("spec.replicas %d after scaling to 5", r)
		}
	})

	t.Run("kubectl get and explain", func(t *testing.T) {
		out := kubectl(t, s, "get", "widgets", "-n", "crd")
		for _, want := range []string{"NAME", "SIZE", "COLOR", "blue"} {
			if !strings.Contains(out, want) {
				t.Fatalf("kubectl get widgets lacks %q:\n%s", want, out)
			}
		}
		if out := kubectl(t, s, "get", "wd", "b", "-n", "crd", "-o", "jsonpath={.spec.size}"); out != "5" {
			t.Fatalf("kubectl get wd b: spec.size %q", out)
		}
		await(t, 20*time.Second, "kubectl explain widgets.spec", func() error {
			out, err := kubectlErr(t, s, "explain", "widgets.spec")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if !strings.Contains(out, "Size of the widget, 1 to 10.") {
				return fmt.Errorf("no field description in:\n%s", out)
			}
			return nil
		})
		rc := s.Client.Discovery().RESTClient()
		await(t, 20*time.Second, "the CRD's schema in /openapi/v2", func() error {
			v2, err := rc.Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").DoRaw(ctx)
			if err != nil {
				return err
			}
			for _, want := range []string{`"com.example.v1.Widget"`, `"/apis/example.com/v1/namespaces/{namespace}/widgets"`,
				`"/apis/apiextensions.k8s.io/v1/customresourcedefinitions"`, `"/api/v1/namespaces/{namespace}/pods"`} {
				if !strings.Contains(string(v2), want) {
					return fmt.Errorf("/openapi/v2 lacks %s", want)
				}
			}
			return nil
		})
		var v3 struct {
			Paths map[string]any `json:"paths"`
		}
		raw, err := rc.Get().AbsPath("/openapi/v3").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &v3); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"apis/example.com/v1", "apis/apiextensions.k8s.io/v1", "api/v1"} {
			if _, ok := v3.Paths[want]; !ok {
				t.Fatalf("/openapi/v3 lacks %s: %v", want, v3.Paths)
			}
		}
		file := filepath.Join(t.TempDir(), "w.yaml")
		if err := os.WriteFile(file, []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: c, namespace: crd}\nspec: {size: 7}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := kubectl(t, s, "apply", "-f", file); !strings.Contains(out, "widget.example.com/c created") {
			t.Fatalf("kubectl apply: %s", out)
		}
	})

	t.Run("RBAC", func(t *testing.T) {
		// as upstream: edit (and admin, view) do not cover CRDs nor, until a ClusterRole aggregated to
		// them grants it, custom resources; cluster-admin covers both
		if _, err := s.Client.RbacV1().RoleBindings("crd").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "alice-edit"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		alice := s.UserConfig(t, "alice")
		crd := widgetCRD()
		crd.Name, crd.Spec.Names.Plural, crd.Spec.Names.Singular, crd.Spec.Names.Kind, crd.Spec.Names.ListKind, crd.Spec.Names.ShortNames =
			"gadgets.example.com", "gadgets", "gadget", "Gadget", "GadgetList", nil
		if _, err := apiextensionsclient.NewForConfigOrDie(alice).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("edit creating a CRD: %v, want 403", err)
		}
		aliceWidgets := dynamic.NewForConfigOrDie(alice).Resource(widgets).Namespace("crd")
		if _, err := aliceWidgets.Create(ctx, widget("by-alice", 2), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("edit creating a widget before aggregation: %v, want 403", err)
		}
		if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"create", "get", "list", "delete"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		await(t, 20*time.Second, "edit aggregating widgets", func() error {
			_, err := aliceWidgets.Create(ctx, widget("by-alice", 2), metav1.CreateOptions{})
			return err
		})
	})

	t.Run("garbage collection", func(t *testing.T) {
		gone := func(what string, get func() error) {
			t.Helper()
			await(t, 30*time.Second, what, func() error {
				if err := get(); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there (%v)", err)
				}
				return nil
			})
		}
		cms := s.Client.CoreV1().ConfigMaps("crd")
		// a built-in dependent of a custom owner
		owner, err := wi.Create(ctx, widget("owner", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID()}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "of-widget", OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// a custom dependent of a built-in owner
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep := widget("of-configmap", 1)
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: cm.UID}})
		if _, err := wi.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wi.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone("the ConfigMap owned by a deleted Widget", func() error { _, err := cms.Get(ctx, "of-widget", metav1.GetOptions{}); return err })
		if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone("the Widget owned by a deleted ConfigMap", func() error { _, err := wi.Get(ctx, "of-configmap", metav1.GetOptions{}); return err })

		// foreground deletion of a custom owner waits for its blocking custom dependent
		fg, err := wi.Create(ctx, widget("fg", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep = widget("fg-dep", 1)
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Widget", Name: "fg", UID: fg.GetUID(), BlockOwnerDeletion: ptr.To(true)}})
		if _, err := wi.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wi.Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
		gone("the foreground-deleted Widget", func() error { _, err := wi.Get(ctx, "fg", metav1.GetOptions{}); return err })
		if _, err := wi.Get(ctx, "fg-dep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the foreground-deleted Widget went before its blocking dependent: %v", err)
		}
	})

	t.Run("namespace deletion removes its custom objects", func(t *testing.T) {
		if err := s.Client.CoreV1().Namespaces().Delete(ctx, "crd", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		await(t, 30*time.Second, "namespace crd gone", func() error {
			_, err := s.Client.CoreV1().Namespaces().Get(ctx, "crd", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		if n := etcdCount(t, cli, "/registry/example.com/widgets/crd/"); n != 0 {
			t.Fatalf("etcd still holds %d widgets of the deleted namespace", n)
		}
	})

	t.Run("CRD deletion removes its objects", func(t *testing.T) {
		if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crd2"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(widgets).Namespace("crd2").Create(ctx, widget("d", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "widgets.example.com", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		await(t, 30*time.Second, "CRD gone", func() error {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		if n := etcdCount(t, cli, "/registry/example.com/widgets/"); n != 0 {
			t.Fatalf("etcd still holds %d widgets of the deleted CRD", n)
		}
		await(t, 10*time.Second, "example.com gone from /apis", func() error {
			var groups metav1.APIGroupList
			if err := s.Client.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").Do(ctx).Into(&groups); err != nil {
				return err
			}
			for _, g := range groups.Groups {
				if g.Name == "example.com" {
					return fmt.Errorf("still listed")
				}
			}
			return nil
		})
	})
}

// etcdCount counts the keys under prefix.
func etcdCount(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctxT(t), prefix, clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}
