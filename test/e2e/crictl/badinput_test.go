package crictl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/bundled"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

// oneLine fails t when err is nil or spans lines.
func oneLine(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want an error", what)
		return
	}
	if strings.Contains(strings.TrimRight(err.Error(), "\n"), "\n") {
		t.Errorf("%s: error spans lines: %q", what, err)
	}
}

// TestEndpointNotARuntime: endpoints that are a regular file, a missing path, or a URL scheme crictl
// cannot dial each give one line naming the endpoint.
func TestEndpointNotARuntime(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "regular", "not a socket")
	for _, ep := range []string{"unix://" + file, "unix://" + filepath.Join(dir, "missing", "x.sock"), "tcp://127.0.0.1:1", "http://127.0.0.1:1", file} {
		c := cli{t: t, ep: ep}
		_, _, err := c.run("ps")
		oneLine(t, "endpoint "+ep, err)
		if err != nil && !strings.Contains(err.Error(), ep) {
			t.Errorf("endpoint %s: error does not name it: %q", ep, err)
		}
	}
}

// TestHostileArguments runs crictl against a real runtime with bad arguments and configs: each fails
// with one line, and nothing (sandbox, container) is left behind.
func TestHostileArguments(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	ctx := context.Background()
	dir := t.TempDir()
	name := "bad-" + suffix()
	podFile, _ := podConfigs(t, rt, name, "crictl-bad")

	count := func() (int, int) {
		pods, err := rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ctrs, err := rt.CRI.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(pods.Items), len(ctrs.Containers)
	}
	p0, c0 := count()

	// configs
	noMeta := writeFile(t, dir, "nometa.yaml", "hostname: x\n")
	_, _, err := c.run("runp", noMeta)
	oneLine(t, "runp without metadata", err)
	wrongType := writeFile(t, dir, "wrongtype.json", `{"metadata": {"name": 5, "namespace": "x"}}`)
	_, _, err = c.run("runp", wrongType)
	oneLine(t, "runp wrong type", err)
	notThere := filepath.Join(dir, "nope.yaml")
	err = c.mustFail([]string{"runp", notThere}, notThere)
	oneLine(t, "runp missing file", err)
	if p, _ := count(); p != p0 {
		t.Errorf("failed runp left %d sandboxes", p-p0)
	}

	pod := rt.RunDemoPod(t, name)
	_ = podFile
	_, c1 := count()
	noImage := writeFile(t, dir, "noimage.json", `{"metadata": {"name": "x"}, "image": {"image": "nodekit.local/does-not-exist:1"}, "linux": {}}`)
	err = c.mustFail([]string{"create", pod.SandboxID, noImage, podFile}, "does-not-exist")
	oneLine(t, "create with missing image", err)
	noImageField := writeFile(t, dir, "noimagefield.json", `{"metadata": {"name": "y"}, "linux": {}}`)
	_, _, err = c.run("create", pod.SandboxID, noImageField, podFile)
	oneLine(t, "create without image", err)
	noName := writeFile(t, dir, "noname.json", fmt.Sprintf(`{"image": {"image": %q}, "linux": {}}`, bundled.DemoServerV1))
	_, _, err = c.run("create", pod.SandboxID, noName, podFile)
	oneLine(t, "create without metadata", err)
	if _, cn := count(); cn != c1 {
		t.Errorf("failed creates left %d containers", cn-c1)
	}

	// IDs and formats
	for _, args := range [][]string{{"inspect", ""}, {"inspectp", ""}, {"stop", ""}, {"rm", ""}, {"logs", ""}, {"exec", "", "true"}} {
		err := c.mustFail(args, "ID")
		oneLine(t, "empty ID "+args[0], err)
	}
	for _, args := range [][]string{{"ps", "-o", "xml"}, {"pods", "-o", "toml"}, {"images", "-o", "csv"}, {"inspect", "-o", "xml", pod.ContainerID}} {
		err := c.mustFail(args, "unsupported")
		oneLine(t, "unknown format "+strings.Join(args, " "), err)
	}
	for _, args := range [][]string{{"ps", "-o", "go-template", "--template", "{{.containers"}, {"pods", "-o", "go-template", "--template", "{{range}}"}, {"inspect", "-o", "go-template", "--template", "{{.bad", pod.ContainerID}} {
		err := c.mustFail(args, "template")
		oneLine(t, "bad template "+strings.Join(args, " "), err)
	}
	for _, ref := range []string{"Bad Ref", "UPPER/case:1", "x@sha256:zz", "a::b", ""} {
		err := c.mustFail([]string{"pull", ref})
		oneLine(t, "pull "+ref, err)
	}
	err = c.mustFail([]string{"rmi", "nodekit.local/never:1"}, "never")
	oneLine(t, "rmi of a missing image", err)
	// A pod ID where a container ID is wanted (and the reverse) is unknown, not silently the other kind.
	err = c.mustFail([]string{"inspect", pod.SandboxID[:12]}, "no container with ID prefix")
	oneLine(t, "inspect of a pod ID prefix", err)
	err = c.mustFail([]string{"inspectp", pod.ContainerID[:12]}, "no pod sandbox with ID prefix")
	oneLine(t, "inspectp of a container ID prefix", err)
	err = c.mustFail([]string{"inspect", pod.SandboxID}, "not found")
	oneLine(t, "inspect of a full pod ID", err)
	err = c.mustFail([]string{"rmp", pod.SandboxID}, "stop")
	oneLine(t, "rmp running pod", err)

	for _, args := range [][]string{{"logs", "--since", "yesterday", pod.ContainerID}, {"exec", pod.ContainerID}, {"stop", "--timeout", "-5", pod.ContainerID},
		{"pods", "--state", "sleepy"}, {"ps", "--state", "zombie"}, {"ps", "--last", "-1"}, {"pods", "--last", "-2"}, {"pods", "--label", "=x"},
		{"stats", "--seconds", "0"}, {"exec", "--timeout", "-1", pod.ContainerID, "true"}} {
		_, _, err := c.run(args...)
		oneLine(t, strings.Join(args, " "), err)
	}
	if out, _, err := c.run("ps", "-q", "--id", pod.ContainerID); err != nil || strings.TrimSpace(out) != pod.ContainerID {
		t.Errorf("a refused stop --timeout -5 touched the container: ps %q %v", out, err)
	}
	// stopped and removed containers
	c.must("stop", pod.ContainerID)
	err = c.mustFail([]string{"exec", pod.ContainerID, "true"}, "EXITED")
	oneLine(t, "exec into a stopped container", err)
	c.must("rm", pod.ContainerID)
	err = c.mustFail([]string{"logs", pod.ContainerID}, pod.ContainerID[:5])
	oneLine(t, "logs of a removed container", err)

	c.must("stopp", pod.SandboxID)
	c.must("rmp", pod.SandboxID)
	if p, cn := count(); p != p0 || cn != c0 {
		t.Errorf("left %d sandboxes and %d containers", p-p0, cn-c0)
	}
	_ = os.Remove
	_ = runtimeapi.ContainerState_CONTAINER_RUNNING
}
