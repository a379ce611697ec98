package runtime

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/runtime/containerd"
	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// BenchmarkPodStart measures RunPodSandbox + CreateContainer + StartContainer of the demo image until
// its /healthz answers 200 over the pod IP (teardown not timed). Run with e.g. -benchtime=10x.
func BenchmarkPodStart(b *testing.B) {
	rt := framework.Start(b, framework.Options{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb := rt.SandboxConfig(fmt.Sprintf("bench-%d", i), framework.Namespace)
		id, ip := rt.RunSandbox(b, sb)
		rt.StartContainer(b, id, sb, framework.DemoContainerConfig("demo", bundled.DemoServerV1, sb, ip))
		framework.HTTPGet(b, "http://"+ip+":8080/healthz")
		b.StopTimer()
		if _, err := rt.CRI.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			b.Fatal(err)
		}
		if _, err := rt.CRI.Runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkContainerdStart measures a managed containerd's start until its CRI endpoint answers
// Version (config generation included; stop not timed).
func BenchmarkContainerdStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp("", "nkbench-")
		if err != nil {
			b.Fatal(err)
		}
		sup, err := containerd.New(context.Background(), containerd.Config{Dir: dir, Binary: os.Getenv(framework.EnvBinary)})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		err = sup.Start(context.Background())
		b.StopTimer()
		sup.Stop(context.Background())
		containerd.UnmountAll(dir)
		os.RemoveAll(dir)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		b.StartTimer()
	}
}
