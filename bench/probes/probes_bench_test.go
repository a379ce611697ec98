// Package probes_bench measures the kubelet's probe manager (kubelet/prober) at scale: 100 pods, each
// with a startup (tcpSocket), a liveness (httpGet) and a readiness (grpc) probe at periodSeconds 1,
// against real HTTP and gRPC health servers on loopback run by a child process (so their CPU is not
// counted). No containers are needed: pod statuses are fed to the manager as the kubelet would. It
// prints the probes run per second, failures, CPU (user+system, % of one core) and memory (Go heap in
// use, RSS, goroutines) of this process over the measured window.
//
//	go test -bench . -benchtime 1x ./bench/probes/
//	NODEKIT_BENCH_PROBES_SECONDS=60 go test -bench . -benchtime 1x ./bench/probes/
package probes_bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/kubelet/prober"
	"github.com/nodekit/nodekit/probes"
)

const (
	pods      = 100
	serverEnv = "NODEKIT_PROBES_BENCH_SERVER"
)

// TestMain turns the test binary into the probed servers when serverEnv is set: it prints
// "<httpPort> <grpcPort>" and serves until its stdin closes.
func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		serve()
		return
	}
	os.Exit(m.Run())
}

func serve() {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	go http.Serve(hl, mux)
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(gl)
	fmt.Printf("%d %d\n", hl.Addr().(*net.TCPAddr).Port, gl.Addr().(*net.TCPAddr).Port)
	io.Copy(io.Discard, os.Stdin)
}

// startServers runs the server child and returns its ports.
func startServers(b *testing.B) (httpPort, grpcPort int) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fmt.Sscanf(line, "%d %d", &httpPort, &grpcPort); err != nil {
		b.Fatalf("server child said %q: %v", line, err)
	}
	return httpPort, grpcPort
}

// counting wraps the real prober and counts results by status.
type counting struct {
	r                      *probes.Prober
	success, failure, errs atomic.Int64
}

func (c *counting) Run(ctx context.Context, p *v1.Probe, t probes.Target) probes.Result {
	r := c.r.Run(ctx, p, t)
	switch r.Status {
	case probes.Success:
		c.success.Add(1)
	case probes.Failure:
		c.failure.Add(1)
	default:
		c.errs.Add(1)
	}
	return r
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rssKiB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return 0
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func BenchmarkProbeManager100Pods(b *testing.B) {
	window := 20 * time.Second
	if s, err := strconv.Atoi(os.Getenv("NODEKIT_BENCH_PROBES_SECONDS")); err == nil && s > 0 {
		window = time.Duration(s) * time.Second
	}
	httpPort, grpcPort := startServers(b)
	for i := 0; i < b.N; i++ {
		run(b, httpPort, grpcPort, window)
	}
}

func run(b *testing.B, httpPort, grpcPort int, window time.Duration) {
	heap0, goroutines0 := heapInUse(), runtime.NumGoroutine()
	runner := &counting{r: probes.New(nil)}
	m := prober.New(prober.Options{Runner: runner, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	podList := make([]*v1.Pod, pods)
	started := metav1.NewTime(time.Now())
	status := func(p *v1.Pod) *v1.PodStatus {
		return &v1.PodStatus{PodIP: "127.0.0.1", ContainerStatuses: []v1.ContainerStatus{{Name: "app",
			ContainerID: "containerd://" + string(p.UID), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}}}
	}
	for i := range podList {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%03d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("bench-uid-%03d", i))},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app",
				StartupProbe:   &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(httpPort))}}},
				LivenessProbe:  &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(httpPort)), Scheme: v1.URISchemeHTTP}}},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(grpcPort)}}},
			}}}}
		podList[i] = p
		m.AddPod(p)
		m.UpdatePodStatus(p, status(p))
	}
	byUID := map[types.UID]*v1.Pod{}
	for _, p := range podList {
		byUID[p.UID] = p
	}
	// The kubelet's part: every result re-generates the pod's status.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case r := <-m.Results():
				m.UpdatePodStatus(byUID[r.PodUID], status(byUID[r.PodUID]))
			}
		}
	}()

	time.Sleep(3 * time.Second) // warm-up: jittered first runs, startup probes pass
	ready := 0
	for _, p := range podList {
		s := status(p)
		m.UpdatePodStatus(p, s)
		if s.ContainerStatuses[0].Ready {
			ready++
		}
	}
	s0, f0, e0 := runner.success.Load(), runner.failure.Load(), runner.errs.Load()
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(window)
	cpu, wall := cpuTime()-cpu0, time.Since(t0)
	succ, fail, errs := runner.success.Load()-s0, runner.failure.Load()-f0, runner.errs.Load()-e0
	heap, rss, goroutines := heapInUse(), rssKiB(), runtime.NumGoroutine()

	close(stop)
	wg.Wait()
	for _, p := range podList {
		m.RemovePod(p)
	}
	m.Close()

	perSec := float64(succ+fail+errs) / wall.Seconds()
	cpuPct := 100 * cpu.Seconds() / wall.Seconds()
	fmt.Printf("probe manager: %d pods x 3 probes (startup tcpSocket, liveness httpGet, readiness grpc), period 1s, %v window\n", pods, wall.Round(time.Second))
	fmt.Printf("  ready after warm-up: %d/%d pods\n", ready, pods)
	fmt.Printf("  probes run: %.0f/s (success %d, failure %d, unknown %d; startup probes stop once passed, so ~200/s is the steady state)\n", perSec, succ, fail, errs)
	fmt.Printf("  CPU: %.1f%% of one core (user+system, %v over %v)\n", cpuPct, cpu.Round(time.Millisecond), wall.Round(time.Millisecond))
	fmt.Printf("  memory: Go heap in use %.1f MiB (%.1f MiB before the manager), RSS %.1f MiB, goroutines %d (%d before)\n",
		float64(heap)/(1<<20), float64(heap0)/(1<<20), float64(rss)/1024, goroutines, goroutines0)
	b.ReportMetric(perSec, "probes/s")
	b.ReportMetric(cpuPct, "cpu%")
	b.ReportMetric(float64(heap-min(heap, heap0))/(1<<20), "heapMiB")
	if fail+errs > 0 || ready != pods {
		b.Errorf("%d failed and %d errored probes, %d/%d pods ready: the local servers should always pass", fail, errs, ready, pods)
	}
}
