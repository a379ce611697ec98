package runtime

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestDemoImage checks the demo server's probe and Service test surfaces inside a real pod: gRPC health
// following the flippable /healthz, UDP echo with the pod name, slow start, simulated crash exit code
// and the SIGTERM delay.
func TestDemoImage(t *testing.T) {
	rt := framework.Start(t, framework.Options{})
	ctx := context.Background()
	pod := rt.RunDemoPod(t, "demo")

	// gRPC health: SERVING, then NOT_SERVING after the exec'd file trigger.
	conn, err := grpc.NewClient(net.JoinHostPort(pod.IP, "9090"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	waitHealth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		var last string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
			cancel()
			if err == nil && resp.Status == want {
				return
			}
			last = resp.GetStatus().String() + " " + errString(err)
		}
		t.Fatalf("gRPC health never %v; last %s", want, last)
	}
	waitHealth(healthpb.HealthCheckResponse_SERVING)
	if _, _, code := rt.Exec(t, pod.ContainerID, "touch", "/tmp/healthz-fail"); code != 0 {
		t.Fatalf("touch exit %d", code)
	}
	waitHealth(healthpb.HealthCheckResponse_NOT_SERVING)

	// UDP echo answers with the pod name.
	c, err := net.Dial("udp", net.JoinHostPort(pod.IP, "8081"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	var got string
	for i := 0; i < 20 && got == ""; i++ {
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, err := c.Read(buf); err == nil {
			got = strings.TrimSpace(string(buf[:n]))
		}
	}
	if got != "demo" {
		t.Errorf("UDP echo answered %q, want the pod name %q", got, "demo")
	}

	// Slow start: nothing listens for the first 3 s.
	slow := rt.RunDemoPod(t, "slow", "--slow-start=3s")
	if _, err := framework.WaitHTTP("http://"+slow.IP+":8080/readyz", 0); err == nil {
		t.Error("slow-start pod answered at once")
	}
	framework.HTTPGet(t, "http://"+slow.IP+":8080/readyz")

	// Simulated crash: the container exits with the chosen code.
	crash := rt.RunDemoPod(t, "crash", "--exit-after=500ms", "--exit-code=3")
	var st *runtimeapi.ContainerStatus
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := rt.CRI.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: crash.ContainerID})
		if err != nil {
			t.Fatal(err)
		}
		if st = resp.Status; st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			break
		}
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 3 {
		t.Errorf("crashing container: state %v exit %d, want EXITED 3", st.State, st.ExitCode)
	}

	// --term-delay: StopContainer waits for the delay (the container exits 0 on its own before the
	// 10 s grace period ends).
	term := rt.RunDemoPod(t, "term", "--term-delay=1500ms")
	framework.HTTPGet(t, "http://"+term.IP+":8080/healthz")
	start := time.Now()
	if _, err := rt.CRI.Runtime().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: term.ContainerID, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	resp, err := rt.CRI.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: term.ContainerID})
	if err != nil {
		t.Fatal(err)
	}
	if took < 1400*time.Millisecond || took > 9*time.Second || resp.Status.ExitCode != 0 {
		t.Errorf("stop with --term-delay=1.5s took %v, exit %d; want about 1.5 s and exit 0", took, resp.Status.ExitCode)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
