package apiserver_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestPodStreamUpgradesProxiedToKubelet sends upgrading pods/exec, pods/attach and pods/portforward
// requests (SPDY, as kubectl does) and checks the API server carries each upgrade to the kubelet's
// /exec/<ns>/<pod>/<container>, /attach/<ns>/<pod>/<container> and /portForward/<ns>/<pod> with its
// kubelet client certificate and upstream's kubelet query (input/output/error/tty=1, command, port),
// then relays bytes both ways over the upgraded connection. A TLS listener on loopback stands in for the
// kubelet and echoes what it reads, upper-cased.
func TestPodStreamUpgradesProxiedToKubelet(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	cert, err := tls.X509KeyPair(mustPEM(t, s))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan string, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go standInKubelet(conn.(*tls.Conn), seen)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}}}}
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("p", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ request, protocol, kubeletSaw string }{
		{"exec?command=echo&command=hi&stdout=true", "v4.channel.k8s.io", "POST /exec/default/p/c?command=echo&command=hi&output=1"},
		{"attach?container=c&stdin=true&stdout=true&tty=true", "v4.channel.k8s.io", "POST /attach/default/p/c?input=1&output=1&tty=1"},
		{"portforward?ports=8080&ports=9090,53", "portforward.k8s.io", "POST /portForward/default/p?port=8080%2C9090%2C53"},
		{"portforward", "portforward.k8s.io", "POST /portForward/default/p"},
	} {
		t.Run(tc.request, func(t *testing.T) {
			// The admin's upgrading request to the API server.
			tlsCfg := &tls.Config{RootCAs: nil, InsecureSkipVerify: true} //nolint:gosec // test client; the server's identity is not under test
			adminCert, err := tls.X509KeyPair(s.Config.TLSClientConfig.CertData, s.Config.TLSClientConfig.KeyData)
			if err != nil {
				t.Fatal(err)
			}
			tlsCfg.Certificates = []tls.Certificate{adminCert}
			host := strings.TrimPrefix(s.URL, "https://")
			conn, err := tls.Dial("tcp", host, tlsCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST /api/v1/namespaces/default/pods/p/%s HTTP/1.1\r\nHost: %s\r\n"+
				"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\nContent-Length: 0\r\n\r\n", tc.request, host, tc.protocol)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				body, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			want := tc.kubeletSaw + " upgrade=SPDY/3.1 protocol=" + tc.protocol + " cn=kube-apiserver-kubelet-client"
			if got := <-seen; got != want {
				t.Fatalf("kubelet saw %q, want %q", got, want)
			}
			conn.Write([]byte("hello"))
			out := make([]byte, 5)
			if _, err := io.ReadFull(br, out); err != nil || string(out) != "HELLO" {
				t.Fatalf("relayed bytes %q %v", out, err)
			}
		})
	}
}

// standInKubelet reads one request from conn, reports it on seen, answers 101 and echoes five bytes
// upper-cased.
func standInKubelet(tc *tls.Conn, seen chan<- string) {
	defer tc.Close()
	req, err := http.ReadRequest(bufio.NewReader(tc))
	if err != nil {
		seen <- "bad request: " + err.Error()
		return
	}
	cn := ""
	if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
		cn = pc[0].Subject.CommonName
	}
	seen <- fmt.Sprintf("%s %s upgrade=%s protocol=%s cn=%s", req.Method, req.URL.RequestURI(), req.Header.Get("Upgrade"),
		req.Header.Get("X-Stream-Protocol-Version"), cn)
	fmt.Fprint(tc, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(tc, buf); err == nil {
		tc.Write([]byte(strings.ToUpper(string(buf))))
	}
}

// mustPEM returns a serving pair for the stand-in kubelet (issued by the cluster CA).
func mustPEM(t *testing.T, s *fw.Server) ([]byte, []byte) {
	kp, err := fw.IssueKubeletServingCert(s.DataDir, "kubelet-serving", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	return kp.CertPEM, kp.KeyPEM
}
