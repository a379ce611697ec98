package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/internal/proxystatus"
	"github.com/nodekit/nodekit/kubelet/server/testpki"
)

// fakeRuntime implements the RuntimeService calls the server makes; the embedded nil client makes any
// other call panic, so the test notices.
type fakeRuntime struct {
	runtimeapi.RuntimeServiceClient
	logPath string
}

func (f *fakeRuntime) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	all := []*runtimeapi.Container{
		{Id: "old", PodSandboxId: "sb1", CreatedAt: 1, State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: map[string]string{labelContainerName: "app"}},
		{Id: "new", PodSandboxId: "sb1", CreatedAt: 2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{labelContainerName: "app"}},
		{Id: "other", PodSandboxId: "sb2", CreatedAt: 3, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{labelContainerName: "app"}},
	}
	var out []*runtimeapi.Container
	for _, c := range all {
		ok := true
		for k, v := range in.GetFilter().GetLabelSelector() {
			ok = ok && c.Labels[k] == v
		}
		if ok {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: in.ContainerId, LogPath: f.logPath + "." + in.ContainerId,
		State: runtimeapi.ContainerState_CONTAINER_EXITED}}, nil
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "sb1", CreatedAt: time.Now().UnixNano(),
		State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{labelPodUID: "uid1", labelPodName: "web", labelPodNamespace: "default"}}}}, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest, ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: "new", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: map[string]string{labelPodUID: "uid1"}},
		Cpu:        &runtimeapi.CpuUsage{UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 1234}},
		Memory:     &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: 4096}},
	}}}, nil
}

type pods []*v1.Pod

func (p pods) Pods() []*v1.Pod { return p }
func (p pods) GetPodByName(ns, name string) (*v1.Pod, bool) {
	for _, x := range p {
		if x.Namespace == ns && x.Name == name {
			return x, true
		}
	}
	return nil, false
}

func TestServer(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	// CRI log format: <RFC3339Nano> <stream> <P|F> <line>
	os.WriteFile(logPath+".new", []byte("2026-01-01T00:00:00.000000001Z stdout F hello\n2026-01-01T00:00:01.000000001Z stderr P par\n2026-01-01T00:00:01.000000002Z stderr F tial\n2026-01-01T00:00:02.000000001Z stdout F last\n"), 0o644)
	os.WriteFile(logPath+".old", []byte("2026-01-01T00:00:00.000000001Z stdout F previous run\n"), 0o644)
	compLog := filepath.Join(dir, "kube-scheduler.log")
	os.WriteFile(compLog, []byte("time=2026-01-01T00:00:00Z level=INFO msg=\"scheduler started\"\ntime=2026-01-01T00:00:01Z level=INFO msg=\"pod scheduled\"\n"), 0o644)
	processLogs := func(ns, pod, container string) (string, bool) {
		return compLog, ns == "kube-system" && pod == "kube-scheduler-n1" && (container == "" || container == "kube-scheduler")
	}
	pki := testpki.New(t)
	p := pods{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid1"}}}
	s, err := New(Config{Address: "127.0.0.1", Port: 0, CertDir: filepath.Join(dir, "pki"), NodeName: "n1",
		NodeIPs: []net.IP{net.ParseIP("127.0.0.1")}, ClientCA: pki.Pool, Authorizer: authorizerfactory.NewPrivilegedGroups("system:masters"), Pods: p, Runtime: &fakeRuntime{logPath: logPath}, RootDir: dir,
		EnableProfiling: true, ProcessLogs: processLogs,
		ProxyStatus: func() proxystatus.Status {
			return proxystatus.Status{Node: "n1", Mode: "iptables", Services: []proxystatus.Service{{Namespace: "default", Name: "web", ResourceVersion: "7"}}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "https://" + s.Addr().String()

	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := anon.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous /healthz = %d, want 401", resp.StatusCode)
	}
	// A certificate from another CA is anonymous too.
	otherTLS, _, _ := testpki.New(t).Client(t, "mallory")
	bad := &http.Client{Transport: &http.Transport{TLSClientConfig: otherTLS}}
	if resp, err := bad.Get(base + "/pods"); err == nil {
		resp.Body.Close()
		t.Errorf("foreign-CA client got %d, want a TLS failure or 401", resp.StatusCode)
	}

	nodeTLS, _, _ := pki.Client(t, "system:node:n2", "system:nodes")
	node := &http.Client{Transport: &http.Transport{TLSClientConfig: nodeTLS}}
	for _, path := range []string{"/pods", "/debug/pprof/heap"} {
		if resp, err := node.Get(base + path); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("another node's %s = %v, %v; want 403", path, resp, err)
		} else {
			resp.Body.Close()
		}
	}

	adminTLS, _, _ := pki.Client(t, "kube-apiserver-kubelet-client", "system:masters")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: adminTLS}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	var ps proxystatus.Status
	if code, body := get(proxystatus.Path); code != 200 || json.Unmarshal([]byte(body), &ps) != nil || ps.Find("default", "web") == nil || ps.Find("default", "web").ResourceVersion != "7" {
		t.Errorf("%s = %d %q", proxystatus.Path, code, body)
	}
	if resp, err := node.Get(base + proxystatus.Path); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another node's %s = %v, %v; want 403", proxystatus.Path, resp, err)
	} else {
		resp.Body.Close()
	}
	code, body := get("/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || list.Kind != "PodList" || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("/pods = %d %q", code, body)
	}
	for path, want := range map[string]string{
		"/containerLogs/default/web/app":                                "hello\npartial\nlast\n",
		"/containerLogs/default/web/app?tailLines=1":                    "last\n",
		"/containerLogs/default/web/app?previous=true":                  "previous run\n",
		"/containerLogs/default/web/app?timestamps=true&tailLines=1":    "2026-01-01T00:00:02.000000001Z last\n",
		"/containerLogs/default/web/app?sinceTime=2026-01-01T00:00:01Z": "partial\nlast\n",
		// A component process's pod: its log file.
		"/containerLogs/kube-system/kube-scheduler-n1/kube-scheduler?tailLines=1": "time=2026-01-01T00:00:01Z level=INFO msg=\"pod scheduled\"\n",
	} {
		if code, body := get(path); code != 200 || body != want {
			t.Errorf("%s = %d %q, want %q", path, code, body, want)
		}
	}
	// Log answers are flushed as they are written (chunked, no Content-Length), as upstream's: the API
	// server's WebSocket log stream needs the body's bytes apart from its end.
	for _, path := range []string{"/containerLogs/default/web/app", "/containerLogs/kube-system/kube-scheduler-n1/kube-scheduler"} {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("%s: Content-Length %d, Transfer-Encoding %v; want a chunked answer", path, resp.ContentLength, resp.TransferEncoding)
		}
	}
	if code, body := get("/containerLogs/kube-system/kube-scheduler-n1/kube-scheduler?previous=true"); code != 400 || !strings.Contains(body, "previous") {
		t.Errorf("previous logs of a process pod = %d %q", code, body)
	}
	if code, _ := get("/containerLogs/kube-system/kube-scheduler-n2/kube-scheduler"); code != 404 {
		t.Errorf("logs of a pod no record names = %d, want 404 (not a file)", code)
	}
	if code, body := get("/containerLogs/default/nope/app"); code != 404 || !strings.Contains(body, "pod default/nope not found") {
		t.Errorf("logs of a missing pod = %d %q", code, body)
	}
	if code, body := get("/containerLogs/default/web/app?tailLines=x"); code != 400 || !strings.Contains(body, "tailLines") {
		t.Errorf("bad tailLines = %d %q", code, body)
	}
	code, body = get("/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary = %d %q", code, body)
	}
	if sum.Node.NodeName != "n1" || sum.Node.Memory == nil || sum.Node.Fs == nil || len(sum.Pods) != 1 || sum.Pods[0].PodRef.Name != "web" ||
		len(sum.Pods[0].Containers) != 1 || *sum.Pods[0].Containers[0].CPU.UsageCoreNanoSeconds != 1234 || *sum.Pods[0].Memory.WorkingSetBytes != 4096 {
		t.Errorf("summary = %s", body)
	}
	// The heap profile in its text form ends with the runtime's MemStats.
	if code, body := get("/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile:") || !strings.Contains(body, "# HeapInuse = ") {
		t.Errorf("/debug/pprof/heap?debug=1 = %d %.200q", code, body)
	}
	if code, body := get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ = %d %.200q", code, body)
	}
	code, body = get("/metrics")
	for _, name := range []string{"kubelet_running_pods 1", `kubelet_running_containers{container_state="running"} 2`, `kubelet_node_name{node="n1"} 1`, "kubelet_pod_start_duration_seconds_bucket"} {
		if code != 200 || !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
