// Package runtime is the runtime floor's end-to-end test: a real containerd started by nodekit's
// supervisor, images imported from archives built in the test run, a pod run through CRI and reached
// over its pod IP, exec and logs, full removal with nothing left behind, and real pulls through CRI from
// `nodekit registry`'s handler. Run it against containerd 2.x with
// NODEKIT_CONTAINERD=/path/to/containerd and that directory first in PATH (make test-containerd2).
package runtime

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/images/registry"
	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestPodLifecycle: runp → create → start of the demo image, HTTP 200 with the pod's name from the pod
// IP, exec, logs, then stop and remove everything and check nothing is left: no sandbox, container,
// network namespace, mount or shim.
func TestPodLifecycle(t *testing.T) {
	rt := framework.Start(t, framework.Options{})
	ctx := context.Background()
	rs := rt.CRI.Runtime()
	t.Logf("containerd %s (config version %d) pid %d at %s", rt.Supervisor.Version(), rt.Supervisor.Version().ConfigVersion(), rt.Supervisor.PID(), rt.Endpoint())

	// The bundled images are in the CRI image store, the sandbox image among them.
	list, err := rt.CRI.Image().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, img := range list.Images {
		tags = append(tags, img.RepoTags...)
	}
	for _, ref := range bundled.All {
		if !slices.Contains(tags, ref) {
			t.Errorf("image %s not imported; CRI lists %v", ref, tags)
		}
	}

	// runp → create → start.
	name := "web-" + fmt.Sprint(time.Now().UnixNano()%100000)
	sb := rt.SandboxConfig(name, framework.Namespace)
	sbID, ip := rt.RunSandbox(t, sb)
	if ip == "" {
		t.Fatal("sandbox has no IP")
	}
	netnsPath := rt.SandboxNetNS(t, sbID)
	if _, err := os.Stat(netnsPath); err != nil {
		t.Fatalf("sandbox netns %q: %v", netnsPath, err)
	}
	ctrID := rt.StartContainer(t, sbID, sb, framework.DemoContainerConfig("demo", bundled.DemoServerV1, sb, ip))

	// runc keeps the container's state in this containerd's state dir, not the shared /run/containerd.
	if _, err := os.Stat(filepath.Join(rt.Supervisor.Params().State, "runc", "k8s.io", ctrID, "state.json")); err != nil {
		t.Errorf("runc state of %s not under the private state dir: %v", ctrID, err)
	}

	// HTTP 200 from the pod IP, naming the pod.
	body := framework.HTTPGet(t, "http://"+ip+":8080/")
	want := fmt.Sprintf("demo-server v1 pod=%s namespace=%s ip=%s host=%s", name, framework.Namespace, ip, name)
	if strings.TrimSpace(body) != want {
		t.Errorf("GET / = %q, want %q", body, want)
	}

	// exec through CRI ExecSync, using the image's toolbox.
	if out, _, code := rt.Exec(t, ctrID, "hostname"); code != 0 || strings.TrimSpace(out) != name {
		t.Errorf("exec hostname = %q (exit %d), want %q", out, code, name)
	}
	if out, _, code := rt.Exec(t, ctrID, "sh", "-c", "echo $POD_NAME in $POD_NAMESPACE"); code != 0 || strings.TrimSpace(out) != name+" in "+framework.Namespace {
		t.Errorf("exec sh -c echo = %q (exit %d)", out, code)
	}
	if _, errOut, code := rt.Exec(t, ctrID, "cat", "/nonexistent"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("exec cat /nonexistent: exit %d stderr %q, want exit 1 and an error", code, errOut)
	}

	// logs: the CRI log file holds the server's start-up lines.
	logPath := filepath.Join(sb.LogDirectory, "demo.log")
	st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.LogPath != logPath || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container status: log %q state %v, want %q RUNNING", st.Status.LogPath, st.Status.State, logPath)
	}
	lines := readCRILog(t, logPath)
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "demo-server v1 listening http=:8080") }) {
		t.Errorf("log %s lacks the listening line: %q", logPath, lines)
	}

	// stop and remove, in kubelet order.
	if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctrID, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	st, err = rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 0 {
		t.Errorf("after StopContainer: %v, %v (want EXITED with code 0)", st.GetStatus().GetState(), err)
	}
	if lines := readCRILog(t, logPath); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "received SIGTERM") }) {
		t.Errorf("log lacks \"received SIGTERM\": %q", lines)
	}
	if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctrID}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sbID}); err != nil {
		t.Fatal(err)
	}

	// Nothing is left.
	if sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(sbs.Items) != 0 {
		t.Errorf("sandboxes left: %v, %v", sbs.GetItems(), err)
	}
	if ctrs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(ctrs.Containers) != 0 {
		t.Errorf("containers left: %v, %v", ctrs.GetContainers(), err)
	}
	if _, err := os.Stat(netnsPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns %s still exists (%v)", netnsPath, err)
	}
	if mounts, err := containerd.MountsUnder(rt.Dir); err != nil || len(mounts) != 0 {
		t.Errorf("mounts left under %s: %v %v", rt.Dir, mounts, err)
	}
	if procs := framework.ProcessesMentioning(rt.Address()); len(procs) != 1 || procs[0] != rt.Supervisor.PID() {
		t.Errorf("processes using %s: %v, want only containerd (pid %d): a shim is left", rt.Address(), procs, rt.Supervisor.PID())
	}
}

// TestRegistryPull pulls a bundled image through CRI from the loopback registry (plain HTTP via
// hosts.toml) and checks the pulled manifest digest is the one built; then a missing tag fails clearly.
func TestRegistryPull(t *testing.T) {
	rt := framework.Start(t, framework.Options{SkipImport: true})
	ctx := context.Background()
	reg, err := registry.Start(ctx, "127.0.0.1:0", framework.ImagesDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := containerd.WriteRegistryHost(rt.Supervisor.RegistryConfigPath(), reg.Addr); err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref(bundled.DemoServerV2)
	resp, err := rt.CRI.Image().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	st, err := rt.CRI.Image().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil || st.Image == nil {
		t.Fatalf("ImageStatus %s: %v %v", ref, st, err)
	}
	wantDigest := reg.Images[ref]
	archiveDigest := archiveDigest(t, bundled.DemoServerV2)
	if wantDigest != archiveDigest {
		t.Errorf("registry serves %s as %s, the archive holds %s", ref, wantDigest, archiveDigest)
	}
	repo := strings.Split(ref, ":v2")[0]
	if !slices.Contains(st.Image.RepoDigests, repo+"@"+archiveDigest) || !slices.Contains(st.Image.RepoTags, ref) || st.Image.Id != resp.ImageRef {
		t.Errorf("pulled image: id %s tags %v digests %v; want tag %s, digest %s@%s, id %s", st.Image.Id, st.Image.RepoTags, st.Image.RepoDigests, ref, repo, archiveDigest, resp.ImageRef)
	}

	missing := reg.Ref("nodekit.local/demo-server:v9")
	_, err = rt.CRI.Image().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: missing}})
	if err == nil {
		t.Fatalf("PullImage %s succeeded", missing)
	}
	msg := status.Convert(err).Message()
	if !strings.Contains(msg, missing) || !strings.Contains(msg, "not found") {
		t.Errorf("missing-tag pull error %q does not name %s and say not found", msg, missing)
	}
	t.Logf("missing tag: %v", err)
}

// TestRuntimeDown: a CRI client against a stopped runtime fails with one clear line.
func TestRuntimeDown(t *testing.T) {
	rt := framework.Start(t, framework.Options{SkipImport: true, NoNetwork: true})
	ep := rt.Endpoint()
	if err := rt.Supervisor.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := cri.Dial(context.Background(), ep)
	if status.Code(err) != codes.Unavailable || !strings.HasPrefix(err.Error(), "runtime not reachable at "+ep+": ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Dial to stopped runtime: %v", err)
	}
}

// readCRILog returns the message part of each line of a CRI log file ("<time> <stream> <P|F> <msg>").
func readCRILog(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) != 4 {
			t.Errorf("malformed CRI log line %q", sc.Text())
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, parts[0]); err != nil || (parts[1] != "stdout" && parts[1] != "stderr") {
			t.Errorf("malformed CRI log line %q", sc.Text())
		}
		out = append(out, parts[3])
	}
	return out
}

// archiveDigest reads the manifest digest of a bundled image's archive from its index.json.
func archiveDigest(t *testing.T, ref string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(framework.ImagesDir(t), build.ArchiveName(ref)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no index.json: %v", f.Name(), err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct{ Manifests []struct{ Digest string } }
		if err := json.NewDecoder(tr).Decode(&idx); err != nil || len(idx.Manifests) != 1 {
			t.Fatalf("%s index.json: %v %+v", f.Name(), err, idx)
		}
		return idx.Manifests[0].Digest
	}
}
