package rbac_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/kubelet/server"
	nodekitserver "github.com/nodekit/nodekit/server"
	fw "github.com/nodekit/nodekit/test/framework/apiserver"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

type podList []*corev1.Pod

func (p podList) Pods() []*corev1.Pod { return p }
func (p podList) GetPodByName(ns, name string) (*corev1.Pod, bool) {
	for _, x := range p {
		if x.Namespace == ns && x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// TestKubeletWebhookAuth serves the kubelet API over a real containerd pod with upstream's webhook
// authentication and authorization against a real API server (the kubelet asks with its node
// credentials): a ServiceAccount token RBAC grants nodes/proxy reads logs and execs, one granted only
// nodes/stats reads stats but gets 403 on logs, one without grants gets 403, a bad token 401, and the
// API server's own kubelet client certificate passes.
func TestKubeletWebhookAuth(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	rt := ctrfw.Start(t, ctrfw.Options{})
	pod := rt.RunDemoPod(t, "web")
	ctx := ctxT(t)
	const node = "node-webhook"
	must(s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	grant := func(name string, rules ...rbacv1.PolicyRule) string {
		tok := saToken(t, s, name)
		must(s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}))(t)
		must(s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{}))(t)
		return tok
	}
	proxyTok := grant("kubelet-proxy", rbacv1.PolicyRule{Verbs: []string{"get", "create"}, APIGroups: []string{""}, Resources: []string{"nodes/proxy"}})
	statsTok := grant("kubelet-stats", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes/stats"}})
	noneTok := saToken(t, s, "kubelet-none")

	ca, err := pki.LoadOrCreateCA(nodekitserver.Config{DataDir: s.DataDir}.Paths().PKIDir)
	if err != nil {
		t.Fatal(err)
	}
	clientCA := x509.NewCertPool()
	clientCA.AddCert(ca.Cert)
	authn, authz, err := server.Webhook(s.NodeClient(t, node), server.WebhookOptions{ClientCA: clientCA})
	if err != nil {
		t.Fatal(err)
	}
	apiPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: types.UID(pod.Sandbox.Metadata.Uid)}}
	srv, err := server.New(server.Config{Address: "127.0.0.1", Port: 0, CertDir: filepath.Join(t.TempDir(), "pki"), NodeName: node,
		NodeIPs: []net.IP{net.IPv4(127, 0, 0, 1)}, ClientCA: clientCA, Authenticator: authn, Authorizer: authz,
		Pods: podList{apiPod}, Runtime: rt.CRI.Runtime(), Images: rt.CRI.Image(), RootDir: rt.Dir})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "https://" + srv.Addr().String()
	logsURL := base + "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/demo"

	call := func(token, method, u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, u, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(proxyTok, http.MethodGet, logsURL); code != 200 || !strings.Contains(body, "demo-server v1 starting") {
		t.Errorf("nodes/proxy token: logs = %d %q", code, body)
	}
	if code, _ := call(proxyTok, http.MethodGet, base+"/pods"); code != 200 {
		t.Errorf("nodes/proxy token: /pods = %d (nodes/proxy covers nodes/pods)", code)
	}
	if code, _ := call(statsTok, http.MethodGet, base+"/stats/summary"); code != 200 {
		t.Errorf("nodes/stats token: /stats/summary = %d", code)
	}
	if code, body := call(statsTok, http.MethodGet, logsURL); code != 403 || !strings.Contains(body, "user=system:serviceaccount:team:kubelet-stats, verb=get, resource=nodes, subresource(s)=[proxy]") {
		t.Errorf("nodes/stats token: logs = %d %q, want 403 naming user, verb and subresource", code, body)
	}
	for name, tok := range map[string]string{"ungranted": noneTok, "stats-only (exec is create)": statsTok} {
		if code, _ := call(tok, http.MethodPost, base+"/exec/"+pod.Namespace+"/"+pod.Name+"/demo?command=true&output=1"); code != 403 {
			t.Errorf("%s token: exec = %d, want 403", name, code)
		}
	}
	if code, _ := call(noneTok, http.MethodGet, base+"/healthz"); code != 403 {
		t.Errorf("ungranted token: /healthz = %d, want 403", code)
	}
	if code, _ := call("not-a-token", http.MethodGet, base+"/healthz"); code != 401 {
		t.Errorf("bad token: /healthz = %d, want 401", code)
	}
	if code, _ := call("", http.MethodGet, base+"/healthz"); code != 401 {
		t.Errorf("anonymous: /healthz = %d, want 401", code)
	}

	// exec with the nodes/proxy token (SPDY through the CRI streaming server)
	execCfg := &rest.Config{Host: base, BearerToken: proxyTok, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	u, _ := url.Parse(base + "/exec/" + pod.Namespace + "/" + pod.Name + "/demo?command=echo&command=hello-webhook&output=1&error=1")
	ex, err := remotecommand.NewSPDYExecutor(execCfg, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil || stdout.String() != "hello-webhook\n" {
		t.Errorf("exec with the nodes/proxy token: %v stdout=%q stderr=%q", err, stdout.String(), stderr.String())
	}

	// the API server's kubelet client certificate (what it presents for kubectl logs/exec) passes
	pkiDir := nodekitserver.Config{DataDir: s.DataDir}.Paths().PKIDir
	cert, err := tls.LoadX509KeyPair(pki.CertPath(pkiDir, pki.KubeletClientName), pki.KeyPath(pkiDir, pki.KubeletClientName))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	resp, err := c.Get(logsURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("API server's kubelet client: logs = %d", resp.StatusCode)
	}
}
