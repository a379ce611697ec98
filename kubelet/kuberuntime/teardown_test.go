package kuberuntime

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/containerd"
	ctrdtest "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestTeardownOutlivesCancelledContext kills and removes a pod on a real containerd with a context
// already cancelled, as a pod worker does when the agent gets SIGTERM mid-kill: StopPodSandbox must
// still run to completion (the agent waits for its pod workers before it stops
// containerd, so containerd is never stopped while it reaps a half-stopped sandbox, which orphans the
// sandbox's shim on containerd 1.6). Afterwards the sandbox is stopped, its shim and netns gone, and
// RemovePod removes it.
func TestTeardownOutlivesCancelledContext(t *testing.T) {
	rt := ctrdtest.Start(t, ctrdtest.Options{})
	cfg := rt.SandboxConfig("teardown", ctrdtest.Namespace)
	id, _ := rt.RunSandbox(t, cfg)
	netns := rt.SandboxNetNS(t, id)
	address := rt.Supervisor.Config().Address
	if shims := containerd.Shims(address); len(shims) != 1 {
		t.Fatalf("shims after RunPodSandbox: %v, want one", shims)
	}
	m, err := New(context.Background(), Options{Runtime: rt.CRI.Runtime(), Images: rt.CRI.Image(),
		Recorder: record.NewFakeRecorder(10), PodLogsDir: t.TempDir(), Log: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	md := cfg.GetMetadata()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: md.Name, Namespace: md.Namespace, UID: types.UID(md.Uid)}}
	st, err := rt.CRI.Runtime().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.KillPod(ctx, pod, &PodStatus{ID: pod.UID, SandboxStatuses: []*runtimeapi.PodSandboxStatus{st.Status}}, nil); err != nil {
		t.Fatalf("KillPod with a cancelled context: %v", err)
	}
	st, err = rt.CRI.Runtime().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox after KillPod: %v, %v; want SANDBOX_NOTREADY", st.GetStatus().GetState(), err)
	}
	if shims := containerd.Shims(address); len(shims) != 0 {
		t.Errorf("shims alive after KillPod stopped the sandbox: %v", shims)
	}
	if _, err := os.Stat(netns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod netns %s left after KillPod (stat: %v)", netns, err)
	}
	if err := m.RemovePod(context.Background(), pod); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	list, err := rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("sandboxes after RemovePod: %v, %v; want none", list.GetItems(), err)
	}
}
