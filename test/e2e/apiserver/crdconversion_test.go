package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

const gadgetGroup = "conv.nodekit.test"

// gadgetConverter is a CRD conversion webhook (apiextensions.k8s.io/v1 ConversionReview) between
// gadgets v1, whose spec holds hostPort "host:port", and v2, whose spec holds host and port apart. It
// counts the objects it converted to each version.
type gadgetConverter struct {
	mu sync.Mutex
	to map[string]int // desired apiVersion -> objects converted
}

func (g *gadgetConverter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range req.Objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
		if spec == nil {
			spec = map[string]any{}
		}
		switch {
		case obj.GetAPIVersion() == gadgetGroup+"/v1" && req.DesiredAPIVersion == gadgetGroup+"/v2":
			host, port, _ := strings.Cut(fmt.Sprint(spec["hostPort"]), ":")
			delete(spec, "hostPort")
			spec["host"], spec["port"] = host, port
		case obj.GetAPIVersion() == gadgetGroup+"/v2" && req.DesiredAPIVersion == gadgetGroup+"/v1":
			spec["hostPort"] = fmt.Sprintf("%v:%v", spec["host"], spec["port"])
			delete(spec, "host")
			delete(spec, "port")
		}
		_ = unstructured.SetNestedMap(obj.Object, spec, "spec")
		obj.SetAPIVersion(req.DesiredAPIVersion)
		out, _ := obj.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
		g.mu.Lock()
		g.to[req.DesiredAPIVersion]++
		g.mu.Unlock()
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

func (g *gadgetConverter) converted(version string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.to[gadgetGroup+"/"+version]
}

func gadgetCRD(storage string, caBundle []byte) *apiextensionsv1.CustomResourceDefinition {
	schemaFor := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + gadgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgetGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: storage == "v1", Schema: schemaFor},
				{Name: "v2", Served: true, Storage: storage == "v2", Schema: schemaFor},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: caBundle,
						Service: &apiextensionsv1.ServiceReference{Namespace: "crdconv", Name: "converter", Path: ptr.To("/crdconvert"), Port: ptr.To[int32](443)}}}},
		},
	}
}

// TestCRDConversionWebhook: a CRD whose conversion webhook is a Service (clientConfig.service) is served
// in both versions through it — the API server calls a ready endpoint of the Service, whose ClusterIP
// nothing routes on the API server's host — including a list of objects stored in different versions
// (upstream's CustomResourceConversionWebhook conformance specs).
func TestCRDConversionWebhook(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	c := s.Client
	ext := apiextensionsclient.NewForConfigOrDie(s.Config)
	dyn := dynamic.NewForConfigOrDie(s.Config)
	testNamespace(ctx, t, c, "crdconv")

	// the webhook: HTTPS on 127.0.0.1 with a certificate for converter.crdconv.svc from a fresh CA
	conv := &gadgetConverter{to: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("/crdconvert", conv)
	hook, ca := serviceHandler(t, "converter", "crdconv", mux)
	if svc := localService(ctx, t, c, "crdconv", "converter", hook); svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("service converter has no ClusterIP (%q)", svc.Spec.ClusterIP)
	}

	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, gadgetCRD("v1", ca), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "gadgets."+gadgetGroup, metav1.DeleteOptions{}) })
	gadgets := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: gadgetGroup, Version: version, Resource: "gadgets"}).Namespace("crdconv")
	}
	gadget := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": gadgetGroup + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"hostPort": "localhost:8080"}}}
	}
	await(t, 30*time.Second, "gadget one created in v1", func() error {
		_, err := gadgets("v1").Create(ctx, gadget("one"), metav1.CreateOptions{})
		return err
	})

	// read in v2: the stored v1 object goes through the webhook
	var last *unstructured.Unstructured
	await(t, 30*time.Second, "gadget one read in v2", func() error {
		var err error
		last, err = gadgets("v2").Get(ctx, "one", metav1.GetOptions{})
		return err
	})
	if host, _, _ := unstructured.NestedString(last.Object, "spec", "host"); host != "localhost" || last.GetAPIVersion() != gadgetGroup+"/v2" {
		t.Fatalf("gadget one in v2: %s spec %v, want spec.host localhost", last.GetAPIVersion(), last.Object["spec"])
	}
	if conv.converted("v2") == 0 {
		t.Fatalf("the webhook converted nothing to v2")
	}

	// storage moves to v2; a second object is stored as v2: lists hold objects stored in both versions
	await(t, 30*time.Second, "storage version v2", func() error {
		crd, err := crds.Get(ctx, "gadgets."+gadgetGroup, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	await(t, 30*time.Second, "gadget two created in v1", func() error {
		_, err := gadgets("v1").Create(ctx, gadget("two"), metav1.CreateOptions{})
		return err
	})
	for _, version := range []string{"v1", "v2"} {
		list, err := gadgets(version).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list in %s: %v", version, err)
		}
		if len(list.Items) != 2 {
			t.Fatalf("list in %s: %d items, want 2", version, len(list.Items))
		}
		for _, it := range list.Items {
			field := map[string]string{"v1": "hostPort", "v2": "host"}[version]
			want := map[string]string{"v1": "localhost:8080", "v2": "localhost"}[version]
			if got, _, _ := unstructured.NestedString(it.Object, "spec", field); got != want || it.GetAPIVersion() != gadgetGroup+"/"+version {
				t.Errorf("list in %s: %s is %s with spec %v, want spec.%s %q", version, it.GetName(), it.GetAPIVersion(), it.Object["spec"], field, want)
			}
		}
	}
	if conv.converted("v1") == 0 {
		t.Errorf("the webhook converted nothing to v1 (gadget two is stored as v2)")
	}
}
