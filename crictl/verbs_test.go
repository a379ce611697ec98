package crictl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// row renders table cells as upstream crictl aligns them: every cell but the last padded to 20
// characters (cells of up to 17 characters; longer ones get 3 spaces of padding).
func row(cells ...string) string {
	var b strings.Builder
	for _, c := range cells[:len(cells)-1] {
		fmt.Fprintf(&b, "%-20s", c)
	}
	return b.String() + cells[len(cells)-1] + "\n"
}

func demoRuntime(now time.Time) *fakeRuntime {
	pod := strings.Repeat("ab", 32)
	return &fakeRuntime{
		pods: []*runtimeapi.PodSandbox{{
			Id: pod, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: now.Add(-3 * time.Minute).UnixNano(),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Attempt: 1},
		}},
		ctrs: []*runtimeapi.Container{
			{Id: strings.Repeat("01", 32), PodSandboxId: pod, State: runtimeapi.ContainerState_CONTAINER_EXITED,
				CreatedAt: now.Add(-2 * time.Hour).UnixNano(), Image: &runtimeapi.ImageSpec{Image: "sha256:" + strings.Repeat("e", 64)},
				Metadata: &runtimeapi.ContainerMetadata{Name: "init"},
				Labels:   map[string]string{labelPodName: "web", labelPodNamespace: "default"}},
			{Id: strings.Repeat("02", 32), PodSandboxId: pod, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
				CreatedAt: now.Add(-5 * time.Minute).UnixNano(), Image: &runtimeapi.ImageSpec{Image: "demo:1"},
				Metadata: &runtimeapi.ContainerMetadata{Name: "srv", Attempt: 2},
				Labels:   map[string]string{labelPodName: "web", labelPodNamespace: "default"}},
		},
	}
}

// TestPsAndPodsVerbs runs the ps and pods verbs on a fake runtime, without cobra, and pins their tables
// byte for byte in upstream crictl's layout.
func TestPsAndPodsVerbs(t *testing.T) {
	cl := criClient{rt: demoRuntime(time.Now())}
	var out bytes.Buffer
	ps := psOptions{output: formatTable}
	if err := ps.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	header := row(colContainer, colImage, colCreated, colState, colName, colAttempt, colPodID, colPod, colNamespace)
	// IDs and the digest image are truncated to 13 characters.
	want := header + row("0202020202020", "demo:1", "5 minutes ago", "Running", "srv", "2", "ababababababa", "web", "default")
	if out.String() != want {
		t.Errorf("ps:\n got %q\nwant %q", out.String(), want)
	}

	out.Reset()
	ps.all, ps.quiet = true, true
	if err := ps.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("02", 32) + "\n" + strings.Repeat("01", 32) + "\n"; out.String() != want {
		t.Errorf("ps -a -q (newest first) = %q, want %q", out.String(), want)
	}

	out.Reset()
	ps = psOptions{output: formatTable, psFilter: psFilter{all: true, listFlags: listFlags{name: "^in"}}}
	if err := ps.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if want := header + row("0101010101010", "eeeeeeeeeeeee", "2 hours ago", "Exited", "init", "0", "ababababababa", "web", "default"); out.String() != want {
		t.Errorf("ps -a --name ^in:\n got %q\nwant %q", out.String(), want)
	}

	out.Reset()
	pods := podsOptions{output: formatTable}
	if err := pods.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	want = row(colPodID, colCreated, colState, colName, colNamespace, colAttempt, colRuntime) +
		row("ababababababa", "3 minutes ago", "Ready", "web", "default", "1", "(default)")
	if out.String() != want {
		t.Errorf("pods:\n got %q\nwant %q", out.String(), want)
	}
	if err := (&podsOptions{output: "xml"}).run(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), `unsupported format "xml"`) {
		t.Errorf("pods -o xml: %v", err)
	}
}

// TestExecExitStatus: a command's non-zero status comes back as *ExitError, which Exit turns into the
// process status without a message; other errors exit 1 with one line.
func TestExecExitStatus(t *testing.T) {
	rt := demoRuntime(time.Now())
	rt.exec = &runtimeapi.ExecSyncResponse{Stdout: []byte("out\n"), Stderr: []byte("err\n"), ExitCode: 3}
	var out, errOut bytes.Buffer
	o := execOptions{sync: true, args: []string{"0202", "false"}}
	err := o.run(context.Background(), criClient{rt: rt}, streams{out: &out, errOut: &errOut})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || out.String() != "out\n" || errOut.String() != "err\n" {
		t.Fatalf("exec -s: err %v, stdout %q, stderr %q; want exit status 3 and the command's output", err, out.String(), errOut.String())
	}
	var msg bytes.Buffer
	if code := Exit(&msg, "crictl", err); code != 3 || msg.Len() != 0 {
		t.Errorf("Exit(exit status 3) = %d, %q; want 3 and no message", code, msg.String())
	}
	o.args = []string{"zz", "true"}
	err = o.run(context.Background(), criClient{rt: rt}, streams{out: &out, errOut: &errOut})
	if code := Exit(&msg, "crictl", err); code != 1 || msg.String() != "crictl: no container with ID prefix \"zz\"\n" {
		t.Errorf("Exit(unknown container) = %d, %q", code, msg.String())
	}
	msg.Reset()
	wrapped := &ExitError{Code: 2, Err: errors.New("bad")}
	if code := Exit(&msg, "nodekit", wrapped); code != 2 || msg.String() != "nodekit: bad\n" {
		t.Errorf("Exit(ExitError with Err) = %d, %q", code, msg.String())
	}
	if code := Exit(&msg, "crictl", nil); code != 0 {
		t.Errorf("Exit(nil) = %d", code)
	}
}
