package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/kubelet/server"
	"github.com/nodekit/nodekit/kubelet/server/testpki"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

// podList is a fixed server.PodSource.
type podList []*v1.Pod

func (p podList) Pods() []*v1.Pod { return p }
func (p podList) GetPodByName(ns, name string) (*v1.Pod, bool) {
	for _, x := range p {
		if x.Namespace == ns && x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// TestKubeletServerOnContainerd serves the kubelet API over a real containerd with a real demo pod and
// checks authentication, /healthz, /pods, /containerLogs of the container (plain, tail, timestamps,
// follow), exec and port-forward through the CRI streaming server, /stats/summary and /metrics.
func TestKubeletServerOnContainerd(t *testing.T) {
	rt := ctrfw.Start(t, ctrfw.Options{})
	pod := rt.RunDemoPod(t, "web")
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: types.UID(pod.Sandbox.Metadata.Uid)}}

	pki := testpki.New(t)
	srv, err := server.New(server.Config{Address: "127.0.0.1", Port: 0, CertDir: filepath.Join(t.TempDir(), "pki"),
		NodeName: "node-e2e", NodeIPs: []net.IP{net.IPv4(127, 0, 0, 1)}, ClientCA: pki.Pool,
		Pods: podList{apiPod}, Runtime: rt.CRI.Runtime(), Images: rt.CRI.Image(), RootDir: rt.Dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "https://" + srv.Addr().String()

	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code, _ := get(t, anon, base+"/pods"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /pods = %d, want 401", code)
	}
	adminTLS, certPEM, keyPEM := pki.Client(t, "kube-apiserver-kubelet-client", "system:masters")
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: adminTLS}}

	if code, body := get(t, c, base+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get(t, c, base+"/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Items) != 1 || list.Items[0].UID != apiPod.UID {
		t.Errorf("/pods = %d %s", code, body)
	}

	// The demo server logs its start line to stdout; the CRI log file is read back without the CRI
	// prefix.
	logsURL := base + "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/demo"
	code, body = get(t, c, logsURL)
	if code != 200 || !strings.Contains(body, "demo-server v1 starting pod=web namespace="+pod.Namespace) || strings.Contains(body, " stdout F ") {
		t.Errorf("/containerLogs = %d %q", code, body)
	}
	if code, body = get(t, c, logsURL+"?tailLines=1&timestamps=true"); code != 200 || strings.Count(body, "\n") != 1 || !strings.Contains(body, "listening") {
		t.Errorf("/containerLogs?tailLines=1&timestamps=true = %d %q", code, body)
	} else if _, err := time.Parse(time.RFC3339Nano, strings.Fields(body)[0]); err != nil {
		t.Errorf("timestamps: first field of %q: %v", body, err)
	}
	// follow: a line logged after the request starts arrives on the open stream.
	followCtx, stopFollow := context.WithTimeout(ctx, 20*time.Second)
	defer stopFollow()
	req, _ := http.NewRequestWithContext(followCtx, http.MethodGet, logsURL+"?follow=true&tailLines=0", nil)
	resp, err := (&http.Client{Transport: c.Transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r, err := http.Post("http://"+pod.IP+":8080/control/readyz?ok=false", "text/plain", nil); err != nil { // logs "control: readyz ok=false"
		t.Fatal(err)
	} else {
		r.Body.Close()
	}
	if line := readUntil(t, resp.Body, "control: readyz"); line == "" {
		t.Error("follow: the new log line did not arrive")
	}
	stopFollow()

	// exec through the kubelet server, proxied to containerd's streaming server (SPDY).
	restCfg := &rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertData: certPEM, KeyData: keyPEM}}
	execURL := base + "/exec/" + pod.Namespace + "/" + pod.Name + "/demo?command=echo&command=hello-from-exec&output=1&error=1"
	ex, err := remotecommand.NewSPDYExecutor(restCfg, http.MethodPost, mustURL(t, execURL))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	defer ecancel()
	if err := ex.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Errorf("exec: %v (stderr %q)", err, stderr.String())
	}
	if stdout.String() != "hello-from-exec\n" {
		t.Errorf("exec stdout = %q", stdout.String())
	}

	// port-forward through the kubelet server to the pod's port 8080 (SPDY, CRI PortForward).
	pfRT, upgrader, err := spdy.RoundTripperFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: pfRT}, http.MethodPost, mustURL(t, base+"/portForward/"+pod.Namespace+"/"+pod.Name))
	stopPF, readyPF := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stopPF, readyPF, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pfDone := make(chan error, 1)
	go func() { pfDone <- pf.ForwardPorts() }()
	select {
	case <-readyPF:
	case err := <-pfDone:
		t.Fatalf("port-forward: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("port-forward not ready within 20 s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward ports: %v %v", ports, err)
	}
	if code, body := get(t, &http.Client{Timeout: 10 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local)); code != 200 || !strings.Contains(body, "web") {
		t.Errorf("GET through port-forward = %d %q", code, body)
	}
	close(stopPF)
	<-pfDone

	code, body = get(t, c, base+"/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary = %d %q", code, body)
	}
	var ps *statsapi.PodStats
	for i := range sum.Pods {
		if sum.Pods[i].PodRef.UID == string(apiPod.UID) {
			ps = &sum.Pods[i]
		}
	}
	if ps == nil || ps.PodRef.Name != "web" || len(ps.Containers) != 1 || ps.Containers[0].Name != "demo" ||
		ps.Containers[0].Memory == nil || ps.Containers[0].Memory.WorkingSetBytes == nil || *ps.Containers[0].Memory.WorkingSetBytes == 0 ||
		ps.Containers[0].CPU == nil || ps.Containers[0].CPU.UsageCoreNanoSeconds == nil || *ps.Containers[0].CPU.UsageCoreNanoSeconds == 0 {
		t.Errorf("/stats/summary pod entry = %+v", ps)
	}
	if sum.Node.Fs == nil || sum.Node.Fs.CapacityBytes == nil || sum.Node.Runtime == nil || sum.Node.Runtime.ImageFs == nil || sum.Node.Runtime.ImageFs.UsedBytes == nil {
		t.Errorf("/stats/summary node = %+v", sum.Node)
	}

	code, body = get(t, c, base+"/metrics")
	for _, want := range []string{"kubelet_running_pods 1\n", `kubelet_running_containers{container_state="running"} 1` + "\n",
		"# TYPE kubelet_pod_start_duration_seconds histogram", `kubelet_node_name{node="node-e2e"} 1`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readUntil reads r until a line containing want arrives (returning it) or r ends ("").
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, line := range strings.Split(string(buf), "\n") {
			if strings.Contains(line, want) {
				return line
			}
		}
		if err != nil {
			return ""
		}
	}
}
