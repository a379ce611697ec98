package runtime

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/containerd"
	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestContainersSurviveRuntimeRestart: a pod keeps serving while containerd is killed (the supervisor
// restarts it) and while it is stopped (a new supervisor on the same directories starts it again); the
// restarted containerd still knows the pod and can exec into it.
func TestContainersSurviveRuntimeRestart(t *testing.T) {
	rt := framework.Start(t, framework.Options{})
	ctx := context.Background()
	pod := rt.RunDemoPod(t, "survivor")
	url := "http://" + pod.IP + ":8080/healthz"
	check := func(when string) {
		t.Helper()
		st, err := rt.CRI.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: pod.ContainerID})
		if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%s: container %v, %v", when, st.GetStatus().GetState(), err)
		}
		if out, _, code := rt.Exec(t, pod.ContainerID, "hostname"); code != 0 || strings.TrimSpace(out) != "survivor" {
			t.Errorf("%s: exec hostname = %q exit %d", when, out, code)
		}
	}

	// SIGKILL: the supervisor restarts containerd; the pod never stops serving.
	old := rt.Supervisor.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitHTTP(url, 0); err != nil {
		t.Errorf("pod stopped serving when containerd was killed: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for rt.Supervisor.PID() == 0 || rt.Supervisor.PID() == old {
		if time.Now().After(deadline) {
			t.Fatal("containerd not restarted after SIGKILL")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, err := rt.CRI.Version(ctx); err != nil; _, err = rt.CRI.Version(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("CRI after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check("after SIGKILL and restart")

	// Stop: containerd goes away (promptly, although shims hold running containers), the pod serves on.
	start := time.Now()
	if err := rt.Supervisor.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("Stop with a running pod took %v: SIGTERM was not enough", took)
	}
	if _, err := framework.WaitHTTP(url, 0); err != nil {
		t.Errorf("pod stopped serving when containerd stopped: %v", err)
	}
	params := rt.Supervisor.Params()
	sup, err := containerd.New(ctx, containerd.Config{Dir: rt.Dir, Binary: os.Getenv(framework.EnvBinary),
		CNIBinDirs: params.CNIBinDirs, CNIConfDir: rt.CNIConfDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rt.Supervisor, rt.CRI = sup, sup.Client() // the framework's cleanup removes the pod and stops this one
	check("after Stop and a new Start")
}
