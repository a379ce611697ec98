package apiserver_test

import (
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestPodLogProxiedToKubelet checks pods/log reaches the pod's node at its InternalIP and kubelet port,
// on /containerLogs/<ns>/<pod>/<container>, authenticated with the API server's kubelet client
// certificate. A TLS server on loopback stands in for the node's kubelet (the kubelet is tested elsewhere).
func TestPodLogProxiedToKubelet(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	type seen struct{ path, query, cn string }
	got := make(chan seen, 1)
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		got <- seen{r.URL.Path, r.URL.RawQuery, cn}
		io.WriteString(w, "hello from the container\n")
	}))
	kp, err := fw.IssueKubeletServingCert(s.DataDir, "n1", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kubelet.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, Certificates: []tls.Certificate{serving}}
	kubelet.StartTLS()
	defer kubelet.Close()
	_, portStr, _ := net.SplitHostPort(kubelet.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}}}}
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("p", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tail := int64(5)
	body, err := s.Client.CoreV1().Pods("default").GetLogs("p", &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != "hello from the container\n" {
		t.Fatalf("log body %q", body)
	}
	r := <-got
	if r.path != "/containerLogs/default/p/c" || r.query != "tailLines=5" || r.cn != "kube-apiserver-kubelet-client" {
		t.Fatalf("kubelet saw %+v", r)
	}
	// over a WebSocket (binary.k8s.io and base64.binary.k8s.io, as the conformance spec "retrieving logs
	// from the container over websockets" and kubectl's clients open it), the same log arrives in frames.
	for _, proto := range []string{"binary.k8s.io", "base64.binary.k8s.io"} {
		if got := logOverWebSocket(t, s, "/api/v1/namespaces/default/pods/p/log?container=c", proto); got != "hello from the container\n" {
			t.Errorf("pods/log over a %s WebSocket = %q", proto, got)
		}
		if r := <-got; r.path != "/containerLogs/default/p/c" {
			t.Errorf("kubelet saw %+v for the WebSocket log", r)
		}
	}
	// bad parameters are refused before the kubelet is asked: 400 for a value that is not a number, 422
	// naming the parameter for one out of range (as kube-apiserver's ValidatePodLogOptions).
	for q, want := range map[string]string{"tailLines=ten": "tailLines", "tailLines=-1": "tailLines: Invalid value: -1",
		"limitBytes=0": "limitBytes", "sinceSeconds=0": "sinceSeconds"} {
		k, v, _ := strings.Cut(q, "=")
		raw, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/pods/p/log").Param(k, v).DoRaw(ctx)
		if err == nil || !strings.Contains(string(raw), want) || !(apierrors.IsBadRequest(err) || apierrors.IsInvalid(err)) {
			t.Errorf("pods/log?%s: got %v %s, want 400/422 naming %q", q, err, raw, want)
		}
	}
	select {
	case r := <-got:
		t.Fatalf("a refused pods/log request reached the kubelet: %+v", r)
	default:
	}
	// a kubelet whose serving certificate the cluster CA did not sign (here self-signed) is refused
	// before anything is sent to it.
	impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the API server sent %s to a kubelet it cannot verify", r.URL.Path)
	}))
	impostor.StartTLS()
	defer impostor.Close()
	_, portStr, _ = net.SplitHostPort(impostor.Listener.Addr().String())
	port, _ = strconv.Atoi(portStr)
	n2 := node.DeepCopy()
	n2.Name, n2.Status.DaemonEndpoints.KubeletEndpoint.Port = "n2", int32(port)
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, n2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("on-impostor", "n2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if body, err := s.Client.CoreV1().Pods("default").GetLogs("on-impostor", &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
		t.Fatalf("logs through a self-signed kubelet: want an error, got %q", body)
	}
	// an unscheduled pod has no kubelet to ask: 400.
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("q", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").GetLogs("q", &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
		t.Fatal("logs of an unscheduled pod must fail")
	}
}

// logOverWebSocket opens path on the API server as a WebSocket with subprotocol proto (TLS client
// certificate of the admin kubeconfig) and returns everything read until the server closes it.
func logOverWebSocket(t *testing.T, s *fw.Server, path, proto string) string {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := websocket.NewConfig("wss"+strings.TrimPrefix(s.Config.Host, "https")+path, "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TlsConfig, cfg.Protocol = tlsCfg, []string{proto}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("open WebSocket %s (%s): %v", path, proto, err)
	}
	defer ws.Close()
	var out strings.Builder
	for {
		var frame []byte
		if err := websocket.Message.Receive(ws, &frame); err != nil {
			if err != io.EOF {
				t.Errorf("read WebSocket %s: %v", path, err)
			}
			break
		}
		if proto == "base64.binary.k8s.io" {
			if frame, err = base64.StdEncoding.DecodeString(string(frame)); err != nil {
				t.Errorf("base64 frame: %v", err)
			}
		}
		out.Write(frame)
	}
	return out.String()
}
