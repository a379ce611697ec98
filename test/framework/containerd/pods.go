package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/bundled"
)

// Namespace is the Kubernetes namespace the helpers put pods in unless told otherwise.
const Namespace = "nodekit-test"

// SandboxConfig returns a CRI pod sandbox config for pod name in namespace: a fresh UID, hostname =
// name, log directory <Dir>/pods/<namespace>_<name>_<uid> (the kubelet's layout), pod network
// namespace (NamespaceMode POD) and no cgroup parent.
func (r *Runtime) SandboxConfig(name, namespace string) *runtimeapi.PodSandboxConfig {
	var b [8]byte
	rand.Read(b[:])
	uid := hex.EncodeToString(b[:])
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join(r.Dir, "pods", namespace+"_"+name+"_"+uid),
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": uid},
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
}

// RunSandbox runs a pod sandbox (RunPodSandbox) and returns its ID and IP (from PodSandboxStatus; empty
// without a network). It fails t on error.
func (r *Runtime) RunSandbox(t testing.TB, cfg *runtimeapi.PodSandboxConfig) (id, ip string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := os.MkdirAll(cfg.GetLogDirectory(), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := r.CRI.Runtime().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox %s/%s: %v", cfg.GetMetadata().GetNamespace(), cfg.GetMetadata().GetName(), err)
	}
	st, err := r.CRI.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: resp.PodSandboxId})
	if err != nil {
		t.Fatalf("PodSandboxStatus %s: %v", resp.PodSandboxId, err)
	}
	return resp.PodSandboxId, st.GetStatus().GetNetwork().GetIp()
}

// DemoContainerConfig returns a container config running image (bundled.DemoServerV1 when empty) with
// args, named name, logging to <name>.log in the sandbox's log directory, with the downward-API
// variables POD_NAME, POD_NAMESPACE and POD_IP the demo server reports.
func DemoContainerConfig(name, image string, sandbox *runtimeapi.PodSandboxConfig, podIP string, args ...string) *runtimeapi.ContainerConfig {
	if image == "" {
		image = bundled.DemoServerV1
	}
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		Envs: []*runtimeapi.KeyValue{
			{Key: "POD_NAME", Value: []byte(sandbox.GetMetadata().GetName())},
			{Key: "POD_NAMESPACE", Value: []byte(sandbox.GetMetadata().GetNamespace())},
			{Key: "POD_IP", Value: []byte(podIP)},
		},
		LogPath: name + ".log",
		Labels:  map[string]string{"io.kubernetes.container.name": name},
		Linux:   &runtimeapi.LinuxContainerConfig{},
	}
}

// StartContainer creates and starts a container in a sandbox and returns its ID. It fails t on error.
func (r *Runtime) StartContainer(t testing.TB, sandboxID string, sandbox *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := r.CRI.Runtime().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	if err != nil {
		t.Fatalf("CreateContainer %s in %s: %v", cfg.GetMetadata().GetName(), sandboxID, err)
	}
	if _, err := r.CRI.Runtime().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatalf("StartContainer %s: %v", resp.ContainerId, err)
	}
	return resp.ContainerId
}

// Pod is a running demo pod.
type Pod struct {
	Name, Namespace string
	SandboxID       string
	ContainerID     string
	// IP is the pod IP.
	IP string
	// Sandbox is the sandbox config (needed again for CreateContainer).
	Sandbox *runtimeapi.PodSandboxConfig
	// LogPath is the container's CRI log file (kubelet's CRI log format: "<RFC3339Nano> stdout F <line>").
	LogPath string
}

// RunDemoPod runs a sandbox for pod name in Namespace and the demo server (bundled.DemoServerV1) in it
// with args, and waits until its HTTP port 8080 answers (unless args move or delay it; then it returns
// once the container started). It fails t on error. The runtime's Close removes the pod.
func (r *Runtime) RunDemoPod(t testing.TB, name string, args ...string) *Pod {
	t.Helper()
	return r.RunPod(t, name, bundled.DemoServerV1, args...)
}

// RunPod is RunDemoPod with another demo image (e.g. bundled.DemoServerV2).
func (r *Runtime) RunPod(t testing.TB, name, image string, args ...string) *Pod {
	t.Helper()
	sb := r.SandboxConfig(name, Namespace)
	id, ip := r.RunSandbox(t, sb)
	ctr := r.StartContainer(t, id, sb, DemoContainerConfig("demo", image, sb, ip, args...))
	p := &Pod{Name: name, Namespace: Namespace, SandboxID: id, ContainerID: ctr, IP: ip, Sandbox: sb,
		LogPath: filepath.Join(sb.LogDirectory, "demo.log")}
	if ip != "" && len(args) == 0 {
		HTTPGet(t, "http://"+ip+":8080/healthz")
	}
	return p
}

// Exec runs cmd in a container with ExecSync (10 s timeout) and returns stdout, stderr and the exit code.
// It fails t when the call itself fails.
func (r *Runtime) Exec(t testing.TB, containerID string, cmd ...string) (stdout, stderr string, exitCode int32) {
	t.Helper()
	resp, err := r.CRI.Runtime().ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: 10})
	if err != nil {
		t.Fatalf("ExecSync %v in %s: %v", cmd, containerID, err)
	}
	return string(resp.Stdout), string(resp.Stderr), resp.ExitCode
}

// HTTPGet GETs url until it answers 200 (retrying connection errors and other statuses for up to 30 s)
// and returns the body. It fails t on timeout.
func HTTPGet(t testing.TB, url string) string {
	t.Helper()
	body, err := WaitHTTP(url, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// WaitHTTP GETs url every 100 ms until it answers 200 or timeout passes; it returns the body, or an
// error with the last failure.
func WaitHTTP(url string, timeout time.Duration) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := client.Get(url)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				return string(b), nil
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("GET %s: no 200 within %v: %s", url, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SandboxNetNS returns the path of a sandbox's network namespace (e.g. /var/run/netns/cni-…), read
// from PodSandboxStatus verbose info (the runtime spec containerd keeps for the sandbox). It fails t if
// there is none.
func (r *Runtime) SandboxNetNS(t testing.TB, sandboxID string) string {
	t.Helper()
	st, err := r.CRI.Runtime().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
		t.Fatalf("sandbox %s verbose info: %v", sandboxID, err)
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path
		}
	}
	t.Fatalf("sandbox %s has no network namespace path in its spec", sandboxID)
	return ""
}
