package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// testWebhook is an HTTPS admission webhook on 127.0.0.1 (httptest's self-signed certificate, which is
// its own CA): /validate refuses Deployments named deny-*, /mutate adds the label mutated=yes.
func testWebhook(t *testing.T) (*httptest.Server, []byte) {
	srv := httptest.NewTLSServer(webhookMux())
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// serviceWebhook serves webhookMux over HTTPS on 127.0.0.1 with a certificate for
// <service>.<namespace>.svc from a fresh CA, and returns the server and that CA.
func serviceWebhook(t *testing.T, service, namespace string) (*httptest.Server, []byte) {
	return serviceHandler(t, service, namespace, webhookMux())
}

// serviceHandler serves h as serviceWebhook serves webhookMux.
func serviceHandler(t *testing.T, service, namespace string, h http.Handler) (*httptest.Server, []byte) {
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Spec{CommonName: service, DNSNames: []string{service + "." + namespace + ".svc"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca.CertificatePEM()
}

func webhookMux() *http.ServeMux {
	mux := http.NewServeMux()
	serve := func(decide func(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
			decide(review.Request, resp)
			review.Request, review.Response = nil, resp
			_ = json.NewEncoder(w).Encode(&review)
		}
	}
	mux.Handle("/validate", serve(func(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		if strings.HasPrefix(req.Name, "deny-") {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "test webhook refuses " + req.Name}
		}
	}))
	// /attach refuses CONNECT pods/attach with stdin to container1 of a pod named deny-*, after checking
	// what kube-apiserver sends for a connect subresource: resource pods, subresource attach, kind
	// PodAttachOptions and the options as the object
	mux.Handle("/attach", serve(func(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		var opts corev1.PodAttachOptions
		if err := json.Unmarshal(req.Object.Raw, &opts); err != nil || req.Operation != admissionv1.Connect ||
			req.Resource != (metav1.GroupVersionResource{Version: "v1", Resource: "pods"}) || req.SubResource != "attach" ||
			req.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "PodAttachOptions"}) || opts.Kind != "PodAttachOptions" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusBadRequest, Message: fmt.Sprintf("unexpected review: operation %s resource %v subresource %q kind %v object %s (%v)",
				req.Operation, req.Resource, req.SubResource, req.Kind, req.Object.Raw, err)}
			return
		}
		if strings.HasPrefix(req.Name, "deny-") && opts.Stdin && opts.Container == "container1" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "attaching to pod " + req.Name + " is not allowed"}
		}
	}))
	mux.Handle("/mutate", serve(func(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`)
		resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	}))
	return mux
}

func admissionDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25"}}}}}}
}

// webhookFor is a webhook on apps/v1 deployments CREATE and UPDATE in namespaces labelled
// admission-test=<ns>.
func webhookFor(ns, url string, ca []byte, fp admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         "deployments.nodekit.test",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		}},
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"admission-test": ns}},
		FailurePolicy:           &fp,
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To[int32](5),
	}
}

// awaitCreate retries creating d until check accepts the outcome (the plugins see a new configuration
// once their informers have it), and returns that outcome.
func awaitCreate(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, d *appsv1.Deployment, check func(*appsv1.Deployment, error) bool) (*appsv1.Deployment, error) {
	t.Helper()
	var got *appsv1.Deployment
	var gotErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, gotErr = c.AppsV1().Deployments(ns).Create(ctx, d.DeepCopy(), metav1.CreateOptions{})
		if check(got, gotErr) {
			return true, nil
		}
		if gotErr == nil {
			_ = c.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{})
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("create deployment %s/%s: last outcome %v (object %v)", ns, d.Name, gotErr, got != nil)
	}
	return got, gotErr
}

func refused(msg string) func(*appsv1.Deployment, error) bool {
	return func(_ *appsv1.Deployment, err error) bool { return err != nil && strings.Contains(err.Error(), msg) }
}

// mutatingPolicy is a MutatingAdmissionPolicy on apps/v1 deployments CREATE with the given mutations
// (reinvocationPolicy Never).
func mutatingPolicy(name string, mutations ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}}},
			Mutations:          mutations,
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		}}
}

func testNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"admission-test": name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDynamicAdmission runs admission webhooks and a ValidatingAdmissionPolicy in the real API server:
// a validating webhook over HTTPS (caBundle verified) refuses one Deployment with its message and allows
// another, and so does one called through clientConfig.service (an endpoint of the service, its
// certificate verified for <service>.<namespace>.svc); failurePolicy Ignore and Fail when the webhook is down; a mutating webhook's JSONPatch is
// stored; a policy refuses replicas 6 with its message; a MutatingAdmissionPolicy's ApplyConfiguration
// and JSONPatch mutations are stored on CREATE (and are in discovery); invalid configurations are 422 with the field
// path; anonymous and unprivileged users get 403.
// localService creates the Service namespace/name (port 443, "https", with a ClusterIP that nothing
// routes here) and its EndpointSlice, whose one ready endpoint is srv on 127.0.0.1; it returns the Service.
func localService(ctx context.Context, t *testing.T, c kubernetes.Interface, namespace, name string, srv *httptest.Server) *corev1.Service {
	t.Helper()
	port := int32(srv.Listener.Addr().(*net.TCPAddr).Port)
	svc, err := c.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices(namespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestDynamicAdmission(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	c := s.Client
	ctx := ctxT(t)
	srv, ca := testWebhook(t)
	vwcs := c.AdmissionregistrationV1().ValidatingWebhookConfigurations()

	t.Run("validating webhook", func(t *testing.T) {
		testNamespace(ctx, t, c, "vwh")
		if _, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "vwh"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{webhookFor("vwh", srv.URL+"/validate", ca, admissionregistrationv1.Fail)}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := awaitCreate(ctx, t, c, "vwh", admissionDeployment("deny-web", 1), refused("test webhook refuses deny-web"))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deployments.nodekit.test" denied the request`) {
			t.Fatalf("want 403 from the webhook, got %v", err)
		}
		if _, err := c.AppsV1().Deployments("vwh").Create(ctx, admissionDeployment("web", 1), metav1.CreateOptions{}); err != nil {
			t.Fatalf("allowed deployment: %v", err)
		}
		// UPDATE goes through it too: a rename is impossible, so the webhook sees the update of web
		d, _ := c.AppsV1().Deployments("vwh").Get(ctx, "web", metav1.GetOptions{})
		d.Spec.Replicas = ptr.To[int32](2)
		if _, err := c.AppsV1().Deployments("vwh").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("allowed update: %v", err)
		}
	})

	t.Run("service webhook", func(t *testing.T) {
		// clientConfig.service: the API server calls an endpoint of the service (from its EndpointSlices)
		// and verifies the certificate for hook.svc.svc against caBundle
		testNamespace(ctx, t, c, "svc")
		hook, hookCA := serviceWebhook(t, "hook", "svc")
		localService(ctx, t, c, "svc", "hook", hook)
		w := webhookFor("svc", "", hookCA, admissionregistrationv1.Fail)
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{CABundle: hookCA,
			Service: &admissionregistrationv1.ServiceReference{Namespace: "svc", Name: "hook", Path: ptr.To("/validate")}}
		if _, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{w}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := awaitCreate(ctx, t, c, "svc", admissionDeployment("deny-web", 1), refused("test webhook refuses deny-web")); !apierrors.IsForbidden(err) {
			t.Fatalf("want 403 from the service webhook, got %v", err)
		}
		if _, err := c.AppsV1().Deployments("svc").Create(ctx, admissionDeployment("web", 1), metav1.CreateOptions{}); err != nil {
			t.Fatalf("allowed deployment: %v", err)
		}
	})

	t.Run("connect webhook", func(t *testing.T) {
		// a validating webhook on CONNECT pods/attach sees the PodAttachOptions and refuses before the
		// API server looks for the pod (none exists: an allowed attach is then 404)
		testNamespace(ctx, t, c, "attach")
		w := webhookFor("attach", srv.URL+"/attach", ca, admissionregistrationv1.Fail)
		w.Name = "attach.nodekit.test"
		w.Rules = []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/attach"}},
		}}
		if _, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "attach"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{w}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		attach := func(pod, container string) error {
			return c.CoreV1().RESTClient().Post().Namespace("attach").Resource("pods").Name(pod).SubResource("attach").
				Param("container", container).Param("stdin", "true").Param("stdout", "true").Do(ctx).Error()
		}
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			err = attach("deny-me", "container1")
			return err != nil && strings.Contains(err.Error(), "attaching to pod deny-me is not allowed"), nil
		}); werr != nil {
			t.Fatalf("attach deny-me: want the webhook's refusal, last outcome %v", err)
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "attach.nodekit.test" denied the request`) {
			t.Fatalf("attach deny-me: want 403 from the webhook, got %v", err)
		}
		// allowed by the webhook: the request goes on to the pod, which does not exist
		if err := attach("deny-me", "container2"); !apierrors.IsNotFound(err) {
			t.Fatalf("attach deny-me container2: want 404 (allowed, no such pod), got %v", err)
		}
	})

	t.Run("failure policy", func(t *testing.T) {
		testNamespace(ctx, t, c, "down")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		downURL := fmt.Sprintf("https://%s/validate", ln.Addr())
		ln.Close() // nothing listens there now
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "down"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{webhookFor("down", downURL, ca, admissionregistrationv1.Fail)}}
		created, err := vwcs.Create(ctx, cfg, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = awaitCreate(ctx, t, c, "down", admissionDeployment("web", 1), refused("failed calling webhook"))
		if !apierrors.IsInternalError(err) {
			t.Fatalf("failurePolicy Fail, webhook down: want 500 failed calling webhook, got %v", err)
		}
		created.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		if _, err := vwcs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		awaitCreate(ctx, t, c, "down", admissionDeployment("web", 1), func(d *appsv1.Deployment, err error) bool { return err == nil })
	})

	t.Run("mutating webhook", func(t *testing.T) {
		testNamespace(ctx, t, c, "mwh")
		w := webhookFor("mwh", srv.URL+"/mutate", ca, admissionregistrationv1.Fail)
		if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "mwh"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: w.Name, ClientConfig: w.ClientConfig, Rules: w.Rules,
				NamespaceSelector: w.NamespaceSelector, FailurePolicy: w.FailurePolicy, SideEffects: w.SideEffects,
				AdmissionReviewVersions: w.AdmissionReviewVersions}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		awaitCreate(ctx, t, c, "mwh", admissionDeployment("web", 1), func(d *appsv1.Deployment, err error) bool {
			return err == nil && d.Labels["mutated"] == "yes"
		})
		stored, err := c.AppsV1().Deployments("mwh").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || stored.Labels["mutated"] != "yes" || stored.Labels["app"] != "web" {
			t.Fatalf("stored deployment labels %v, %v: want app=web and mutated=yes", stored.Labels, err)
		}
	})

	t.Run("validating admission policy", func(t *testing.T) {
		testNamespace(ctx, t, c, "vap")
		if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "replicas must be at most 5"}},
			}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "max-replicas-vap"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-replicas",
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"admission-test": "vap"}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := awaitCreate(ctx, t, c, "vap", admissionDeployment("big", 6), refused("replicas must be at most 5"))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-vap' denied request") {
			t.Fatalf("want 422 from the policy, got %v", err)
		}
		if _, err := c.AppsV1().Deployments("vap").Create(ctx, admissionDeployment("small", 5), metav1.CreateOptions{}); err != nil {
			t.Fatalf("replicas 5: %v", err)
		}
		// the binding's namespace selector keeps the policy off other namespaces
		if _, err := c.AppsV1().Deployments("vwh").Create(ctx, admissionDeployment("big", 6), metav1.CreateOptions{}); err != nil {
			t.Fatalf("replicas 6 outside the binding: %v", err)
		}
	})

	t.Run("mutating admission policy", func(t *testing.T) {
		// served and in discovery, as upstream's conformance specs look for them
		res, err := c.Discovery().ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
		if err != nil {
			t.Fatal(err)
		}
		verbs := map[string]metav1.Verbs{}
		for _, r := range res.APIResources {
			verbs[r.Name] = r.Verbs
		}
		for _, name := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
			for _, v := range []string{"create", "get", "list", "watch", "patch", "update", "delete", "deletecollection"} {
				if !slices.Contains(verbs[name], v) {
					t.Errorf("discovery: %s verbs %v: want %s", name, verbs[name], v)
				}
			}
		}
		testNamespace(ctx, t, c, "map")
		maps := c.AdmissionregistrationV1().MutatingAdmissionPolicies()
		created, err := maps.Create(ctx, mutatingPolicy("add-label", admissionregistrationv1.Mutation{
			PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
				Expression: `Object{metadata: Object.metadata{labels: {"mutated-by": "policy"}}}`}},
			admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/spec/replicas", value: object.spec.replicas + 1}]`}},
		), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.FailurePolicy == nil || *created.Spec.FailurePolicy != admissionregistrationv1.Fail ||
			created.Spec.MatchConstraints.MatchPolicy == nil || *created.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent {
			t.Errorf("defaults: failurePolicy %v, matchPolicy %v: want Fail, Equivalent", created.Spec.FailurePolicy, created.Spec.MatchConstraints.MatchPolicy)
		}
		if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "add-label-map"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "add-label",
				MatchResources: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"admission-test": "map"}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		awaitCreate(ctx, t, c, "map", admissionDeployment("web", 2), func(d *appsv1.Deployment, err error) bool {
			return err == nil && d.Labels["mutated-by"] == "policy"
		})
		stored, err := c.AppsV1().Deployments("map").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || stored.Labels["mutated-by"] != "policy" || stored.Labels["app"] != "web" || *stored.Spec.Replicas != 3 {
			t.Fatalf("stored deployment labels %v replicas %v, %v: want app=web, mutated-by=policy, replicas 3", stored.Labels, stored.Spec.Replicas, err)
		}
		// the binding's namespace selector keeps the policy off other namespaces
		other, err := c.AppsV1().Deployments("vwh").Create(ctx, admissionDeployment("unmutated", 2), metav1.CreateOptions{})
		if err != nil || other.Labels["mutated-by"] != "" || *other.Spec.Replicas != 2 {
			t.Fatalf("deployment outside the binding: labels %v, %v: want no mutation", other.Labels, err)
		}
		// collection operations, as the conformance specs use them
		if err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := maps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if l, err := maps.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
			t.Fatalf("after deletecollection: %v, %v", l, err)
		}
	})

	t.Run("invalid mutating policies", func(t *testing.T) {
		apply := admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{}`}}
		for _, tc := range []struct {
			name, field string
			edit        func(p *admissionregistrationv1.MutatingAdmissionPolicy)
		}{
			{"no mutations", "spec.mutations", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.Mutations = nil }},
			{"bad patchType", "spec.mutations[0].patchType", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.Mutations[0].PatchType = "Merge" }},
			{"bad CEL", "spec.mutations[0].applyConfiguration.expression", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
				p.Spec.Mutations[0].ApplyConfiguration.Expression = "Object{"
			}},
			{"jsonPatch with ApplyConfiguration", "spec.mutations[0].jsonPatch", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
				p.Spec.Mutations[0].JSONPatch = &admissionregistrationv1.JSONPatch{Expression: "[]"}
			}},
			{"no reinvocationPolicy", "spec.reinvocationPolicy", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.ReinvocationPolicy = "" }},
			{"DELETE", "spec.matchConstraints.resourceRules[0].operations[0]", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
				p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
			}},
			{"no matchConstraints", "spec.matchConstraints", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.MatchConstraints = nil }},
			{"paramKind without kind", "spec.paramKind.kind", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1"}
			}},
		} {
			p := mutatingPolicy("bad", *apply.DeepCopy())
			tc.edit(p)
			_, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: want 422 naming %s, got %v", tc.name, tc.field, err)
			}
		}
		_, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-binding"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				ParamRef: &admissionregistrationv1.ParamRef{Name: "p"}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.policyName") || !strings.Contains(err.Error(), "spec.paramRef.parameterNotFoundAction") {
			t.Errorf("bad binding: want 422 naming spec.policyName and spec.paramRef.parameterNotFoundAction, got %v", err)
		}
	})

	t.Run("invalid configurations", func(t *testing.T) {
		base := webhookFor("x", "https://127.0.0.1:1/", ca, admissionregistrationv1.Fail)
		for _, tc := range []struct {
			name, field string
			edit        func(w *admissionregistrationv1.ValidatingWebhook)
		}{
			{"http url", "webhooks[0].clientConfig.url", func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.URL = ptr.To("http://127.0.0.1:1/") }},
			{"no sideEffects", "webhooks[0].sideEffects", func(w *admissionregistrationv1.ValidatingWebhook) { w.SideEffects = nil }},
			{"timeout 31", "webhooks[0].timeoutSeconds", func(w *admissionregistrationv1.ValidatingWebhook) { w.TimeoutSeconds = ptr.To[int32](31) }},
			{"url and service", "webhooks[0].clientConfig", func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"}
			}},
			{"bad operation", "webhooks[0].rules[0].operations[0]", func(w *admissionregistrationv1.ValidatingWebhook) {
				w.Rules[0].Operations = []admissionregistrationv1.OperationType{"PATCH"}
			}},
			{"short name", "webhooks[0].name", func(w *admissionregistrationv1.ValidatingWebhook) { w.Name = "hook" }},
		} {
			w := base
			w.Rules = []admissionregistrationv1.RuleWithOperations{*base.Rules[0].DeepCopy()}
			w.ClientConfig.URL = ptr.To(*base.ClientConfig.URL)
			tc.edit(&w)
			_, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{w}}, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: want 422 naming %s, got %v", tc.name, tc.field, err)
			}
		}
		_, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dup"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{base, base}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "webhooks[1].name: Duplicate value") {
			t.Errorf("duplicate webhook names: want 422, got %v", err)
		}
		_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-cel"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: base.Rules[0]}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <="}},
			}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.validations[0].expression") || !strings.Contains(err.Error(), "compilation failed") {
			t.Errorf("bad CEL: want 422 naming spec.validations[0].expression, got %v", err)
		}
		_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-binding"},
			Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{ValidationActions: []admissionregistrationv1.ValidationAction{"Block"}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.policyName") || !strings.Contains(err.Error(), "spec.validationActions[0]") {
			t.Errorf("bad binding: want 422 naming spec.policyName and spec.validationActions[0], got %v", err)
		}
	})

	t.Run("unprivileged users", func(t *testing.T) {
		for name, cfg := range map[string]*rest.Config{"anonymous": rest.AnonymousClientConfig(s.Config), "eve": s.UserConfig(t, "eve")} {
			cl := kubernetes.NewForConfigOrDie(cfg)
			_, err := cl.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: "sneaky"}}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s creating a webhook configuration: want 403, got %v", name, err)
			}
			_, err = cl.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "sneaky"}}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s creating a policy: want 403, got %v", name, err)
			}
			_, err = cl.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, mutatingPolicy("sneaky"), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s creating a mutating policy: want 403, got %v", name, err)
			}
		}
	})
}
