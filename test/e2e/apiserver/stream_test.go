package apiserver_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// streamCall sends method to path (under the API server's URL) as cfg's user, without an upgrade, and
// returns the status code and the Status message of the answer.
func streamCall(t *testing.T, s *fw.Server, cfg *rest.Config, method, path string) (int, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return resp.StatusCode, st.Message
	}
	return resp.StatusCode, string(body)
}

// TestPodStreamsBadInputAndAccess checks pods/attach, pods/portforward and pods/exec refuse bad options
// with 400 naming the pod and the field, and authorize as kube-apiserver: "create" on the subresource
// for POST (SPDY), "get" and "create" for GET (WebSocket); anonymous users, service accounts without
// grants and nodes (the Node authorizer grants no stream) get 403, a bad token 401. An allowed request
// that is not an upgrade gets 400 "Upgrade request required": the one answer that comes after
// authorization and validation.
func TestPodStreamsBadInputAndAccess(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 1}}}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{pod("p", "n1"), pod("unbound", "")} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const base = "/api/v1/namespaces/default/pods/"
	const upgradeRequired = "Upgrade request required"

	t.Run("BadInput", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			code int
			msg  string
		}{
			{"p/attach?container=nope&stdout=true", 400, "container nope is not valid for pod p"},
			{"p/attach?container=c", 400, "pod p: attach needs at least one of stdin, stdout or stderr"},
			{"p/exec?command=ls", 400, "pod p: exec needs at least one of stdin, stdout or stderr"},
			{"p/exec?stdout=true", 400, "you must specify at least 1 command"},
			{"p/exec?command=ls&stdout=true&container=nope", 400, "container nope is not valid for pod p"},
			{"p/portforward?ports=0", 400, "pod p: ports: 0 is not a valid port number (1-65535)"},
			{"p/portforward?ports=80,70000", 400, "pod p: ports: 70000 is not a valid port number (1-65535)"},
			{"p/portforward?ports=http", 400, `ports: "http" is not a port number`},
			{"unbound/attach?stdout=true", 400, "pod unbound does not have a host assigned"},
			{"unbound/portforward", 400, "pod unbound does not have a host assigned"},
			{"missing/attach?stdout=true", 404, `pods "missing" not found`},
			{"missing/portforward", 404, `pods "missing" not found`},
			{"p/attach?stdin=true&stdout=true&stderr=true", 400, upgradeRequired},
			{"p/portforward?ports=8080", 400, upgradeRequired},
			{"p/ephemeralcontainers", 405, "does not allow this method"}, // get, update and patch only
		} {
			code, msg := streamCall(t, s, s.Config, http.MethodPost, base+tc.path)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("POST %s: %d %q, want %d with %q", tc.path, code, msg, tc.code, tc.msg)
			}
		}
	})

	t.Run("Access", func(t *testing.T) {
		grant := func(user string, verbs ...string) *rest.Config {
			name := "streams-" + user
			if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
				Rules: []rbacv1.PolicyRule{{Verbs: verbs, APIGroups: []string{""}, Resources: []string{"pods/attach", "pods/portforward"}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return s.UserConfig(t, user)
		}
		getter, creator, both := grant("getter", "get"), grant("creator", "create"), grant("both", "get", "create")
		// the RBAC informers see the bindings moments after they are written
		eventually(t, "the bindings in force", func() error {
			if code, msg := streamCall(t, s, both, http.MethodGet, base+"p/portforward"); code != 400 || msg != upgradeRequired {
				return fmt.Errorf("%d %s", code, msg)
			}
			return nil
		})

		if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sa := rest.AnonymousClientConfig(s.Config)
		sa.BearerToken = tr.Status.Token
		badToken := rest.AnonymousClientConfig(s.Config)
		badToken.BearerToken = "not-a-token"

		for _, sub := range []string{"attach?stdout=true", "portforward"} {
			for _, tc := range []struct {
				who    string
				cfg    *rest.Config
				method string
				code   int
				msg    string
			}{
				{"anonymous", rest.AnonymousClientConfig(s.Config), http.MethodPost, 403, `User "system:anonymous" cannot create resource "pods/`},
				{"anonymous", rest.AnonymousClientConfig(s.Config), http.MethodGet, 403, `User "system:anonymous" cannot get resource "pods/`},
				{"bad token", badToken, http.MethodPost, 401, "Unauthorized"},
				{"service account without grants", sa, http.MethodPost, 403, `User "system:serviceaccount:default:nobody" cannot create resource "pods/`},
				{"node of the pod", s.NodeConfig(t, "n1"), http.MethodPost, 403, `User "system:node:n1" cannot create resource "pods/`},
				{"node of the pod", s.NodeConfig(t, "n1"), http.MethodGet, 403, `User "system:node:n1" cannot get resource "pods/`},
				{"get only", getter, http.MethodPost, 403, `User "getter" cannot create resource "pods/`},
				{"get only", getter, http.MethodGet, 403, `User "getter" cannot create resource "pods/`},
				{"create only", creator, http.MethodPost, 400, upgradeRequired},
				{"create only", creator, http.MethodGet, 403, `User "creator" cannot get resource "pods/`},
				{"get and create", both, http.MethodGet, 400, upgradeRequired},
				{"get and create", both, http.MethodPost, 400, upgradeRequired},
			} {
				code, msg := streamCall(t, s, tc.cfg, tc.method, base+"p/"+sub)
				if code != tc.code || !strings.Contains(msg, tc.msg) {
					t.Errorf("%s: %s pods/%s: %d %q, want %d with %q", tc.who, tc.method, sub, code, msg, tc.code, tc.msg)
				}
			}
		}
	})
}

// TestPodStreamsOutliveRequestTimeout follows a pod's log for three times the API server's request
// timeout: pod streams are long-running requests, as kube-apiserver's (attach, exec, log, portforward,
// proxy), so no timeout cuts them. A TLS server on loopback stands in for the kubelet and writes a log
// line every 300 ms.
func TestPodStreamsOutliveRequestTimeout(t *testing.T) {
	s := fw.Start(t, fw.Options{RequestTimeout: time.Second})
	ctx := ctxT(t)
	cert, err := tls.X509KeyPair(mustPEM(t, s))
	if err != nil {
		t.Fatal(err)
	}
	const lines = 10
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containerLogs/default/p/c" || r.URL.Query().Get("follow") != "true" {
			http.Error(w, "unexpected "+r.URL.RequestURI(), http.StatusBadRequest)
			return
		}
		for i := range lines {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
		}
	}))
	kubelet.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	kubelet.StartTLS()
	defer kubelet.Close()
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}}}}
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("p", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rc, err := s.Client.CoreV1().Pods("default").GetLogs("p", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if got := strings.Count(string(b), "\n"); got != lines || err != nil {
		t.Fatalf("followed log after %v: %d of %d lines (%v):\n%s", time.Since(start).Round(time.Millisecond), got, lines, err, b)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("the log took %v, less than twice the request timeout: the test proves nothing", d)
	}
}
