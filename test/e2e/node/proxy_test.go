package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// testProxy checks pods/proxy, services/proxy and nodes/proxy against the running web pod (demo-server
// on its container port "http", 8080, labelled app=web) and its node's kubelet: the API server dials the
// pod's IP itself, resolves a service's port (by name or number) to the endpoint's targetPort through
// its EndpointSlices, proxies every method and the path with its trailing slash, and answers the
// errors kube-apiserver does.
func testProxy(t *testing.T, cfg *rest.Config, kubeconfig, nodeName string, kubeletPort int, web *v1.Pod) {
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	ns := web.Namespace
	raw := func(method, path string) (string, error) {
		b, err := admin.CoreV1().RESTClient().Verb(method).AbsPath(path).DoRaw(ctx)
		return string(b), err
	}
	pods := "/api/v1/namespaces/" + ns + "/pods/"
	svcs := "/api/v1/namespaces/" + ns + "/services/"

	t.Run("Pod", func(t *testing.T) {
		// (the client's Accept: application/json reaches the pod: its "/" answers JSON)
		for path, want := range map[string]string{
			pods + web.Name + ":8080/proxy/":           `"hostname": "` + web.Name + `"`,
			pods + "http:" + web.Name + ":8080/proxy/": `"hostname": "` + web.Name + `"`,
			pods + web.Name + "/proxy/healthz":         "ok\n", // no port: the pod's first declared one
		} {
			if body, err := raw("GET", path); err != nil || !strings.Contains(body, want) {
				t.Errorf("GET %s = %q, %v; want %q", path, body, err, want)
			}
		}
		// every method reaches the pod (the demo server's POST handler answers; its mux refuses the others
		// on that path with 405, which is the pod's answer passed through)
		if body, err := admin.CoreV1().RESTClient().Post().AbsPath(pods+web.Name+":8080/proxy/control/readyz").Param("ok", "true").DoRaw(ctx); err != nil || string(body) != "readyz ok=true\n" {
			t.Errorf("POST pods/proxy/control/readyz = %q, %v", body, err)
		}
		for _, m := range []string{"PUT", "PATCH", "DELETE"} {
			_, err := raw(m, pods+web.Name+":8080/proxy/control/readyz")
			if se, ok := err.(*apierrors.StatusError); !ok || se.ErrStatus.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s pods/proxy/control/readyz: %v, want the pod's 405", m, err)
			}
		}
		if body, err := admin.CoreV1().Pods(ns).ProxyGet("http", web.Name, "8080", "json", nil).DoRaw(ctx); err != nil || !strings.Contains(string(body), `"version": "v1"`) {
			t.Errorf("ProxyGet pod json = %q, %v", body, err)
		}
		if kubectl := kubectlPath(); kubectl != "" {
			out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "--raw", pods+web.Name+":8080/proxy/healthz").CombinedOutput()
			if err != nil || string(out) != "ok\n" {
				t.Errorf("kubectl get --raw pods/proxy/healthz = %q, %v", out, err)
			}
		}
		// the bare proxy root is redirected to the root with a slash, as kube-apiserver's
		tc, err := cfg.TransportConfig()
		if err != nil {
			t.Fatal(err)
		}
		rt, err := transport.New(tc)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: rt, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := hc.Get(cfg.Host + pods + web.Name + ":8080/proxy")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMovedPermanently || !strings.HasSuffix(resp.Header.Get("Location"), "/proxy/") {
			t.Errorf("GET pods/proxy (no slash) = %d Location %q, want 301 to .../proxy/", resp.StatusCode, resp.Header.Get("Location"))
		}
		expectStatus(t, raw, pods+"nope/proxy/", http.StatusNotFound, `pods "nope" not found`)
		expectStatus(t, raw, pods+"a:b:c:d/proxy/", http.StatusBadRequest, `invalid pod request "a:b:c:d"`)
		expectStatus(t, raw, pods+"ftp:"+web.Name+":8080/proxy/", http.StatusBadRequest, "invalid pod request")
	})

	t.Run("Service", func(t *testing.T) {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: randName("web-"), Namespace: ns}, Spec: v1.ServiceSpec{
			Selector: web.Labels, Ports: []v1.ServicePort{
				{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "alt", Port: 81, TargetPort: intstr.FromInt32(8080)},
			}}}
		empty := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: randName("none-"), Namespace: ns}, Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "nothing"}, Ports: []v1.ServicePort{{Port: 80}}}}
		for _, s := range []*v1.Service{svc, empty} {
			if _, err := admin.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.CoreV1().Services(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
		}
		waitFor(t, 60*time.Second, "the service's EndpointSlice with the ready pod and every service port", func() (bool, string) {
			l, err := admin.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
			if err != nil {
				return false, err.Error()
			}
			for _, s := range l.Items {
				ports := map[string]bool{}
				for _, p := range s.Ports {
					if p.Name != nil && p.Port != nil {
						ports[*p.Name] = true
					}
				}
				all := len(ports) == len(svc.Spec.Ports)
				for _, sp := range svc.Spec.Ports {
					all = all && ports[sp.Name]
				}
				for _, e := range s.Endpoints {
					if all && e.Conditions.Ready != nil && *e.Conditions.Ready {
						return true, ""
					}
				}
			}
			return false, fmt.Sprintf("%+v", l.Items)
		})
		for path, want := range map[string]string{
			svcs + svc.Name + ":web/proxy/":               `"hostname": "` + web.Name + `"`, // named targetPort "http"
			svcs + "http:" + svc.Name + ":80/proxy/":      `"hostname": "` + web.Name + `"`, // a port number names its service port
			svcs + svc.Name + ":alt/proxy/healthz":        "ok\n",
			svcs + "http:" + svc.Name + ":alt/proxy/json": `"hostname": "` + web.Name + `"`,
		} {
			if body, err := raw("GET", path); err != nil || !strings.Contains(body, want) {
				t.Errorf("GET %s = %q, %v; want %q", path, body, err, want)
			}
		}
		if body, err := admin.CoreV1().Services(ns).ProxyGet("", svc.Name, "web", "healthz", nil).DoRaw(ctx); err != nil || string(body) != "ok\n" {
			t.Errorf("ProxyGet service healthz = %q, %v", body, err)
		}
		if body, err := admin.CoreV1().RESTClient().Post().AbsPath(svcs+svc.Name+":alt/proxy/control/readyz").Param("ok", "true").DoRaw(ctx); err != nil || string(body) != "readyz ok=true\n" {
			t.Errorf("POST services/proxy/control/readyz = %q, %v", body, err)
		}
		expectStatus(t, raw, svcs+svc.Name+":82/proxy/", http.StatusServiceUnavailable, fmt.Sprintf("no service port 82 found for service %q", svc.Name))
		expectStatus(t, raw, svcs+empty.Name+"/proxy/", http.StatusServiceUnavailable, fmt.Sprintf("no endpoints available for service %q", empty.Name))
		expectStatus(t, raw, svcs+"nope:80/proxy/", http.StatusNotFound, `services "nope" not found`)
	})

	t.Run("Node", func(t *testing.T) {
		nodes := "/api/v1/nodes/"
		for _, path := range []string{nodes + nodeName + "/proxy/healthz", nodes + nodeName + ":" + strconv.Itoa(kubeletPort) + "/proxy/healthz",
			nodes + "https:" + nodeName + ":" + strconv.Itoa(kubeletPort) + "/proxy/healthz"} {
			if body, err := raw("GET", path); err != nil || body != "ok" {
				t.Errorf("GET %s = %q, %v; want the kubelet's ok", path, body, err)
			}
		}
		if body, err := admin.CoreV1().RESTClient().Get().Resource("nodes").Name(nodeName).SubResource("proxy").Suffix("pods").DoRaw(ctx); err != nil || !strings.Contains(string(body), web.Name) {
			t.Errorf("nodes/proxy/pods = %.200q, %v", body, err)
		}
		// another port on the node's loopback address is not proxied
		expectStatus(t, raw, nodes+nodeName+":1/proxy/", http.StatusBadRequest, "address not allowed")
		expectStatus(t, raw, nodes+"nope/proxy/healthz", http.StatusNotFound, `nodes "nope" not found`)
	})
}

// expectStatus checks that GET path fails with a Status of code whose message contains msg.
func expectStatus(t *testing.T, raw func(method, path string) (string, error), path string, code int32, msg string) {
	t.Helper()
	body, err := raw("GET", path)
	var st metav1.Status
	if jerr := json.Unmarshal([]byte(body), &st); err == nil || jerr != nil || st.Code != code || !strings.Contains(st.Message, msg) {
		t.Errorf("GET %s: %v %q, want %d %q", path, err, body, code, msg)
	}
}
