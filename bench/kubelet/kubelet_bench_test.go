// Package kubelet_bench measures pod start latency through nodekit's kubelet — pod created in the API →
// phase Running with its container running, as seen through a watch — for one pod at a time and for a
// batch of 30 created together, with the image already present; and, in the same run against the same
// containerd, the raw-CRI floor: RunPodSandbox + CreateContainer + StartContainer of the same image with
// no kubelet and no API. It prints p50/p99 side by side, then the time to fill the node with 110 pods
// and the agent's resident memory with those 110 pods running. The agent (agent.Run, what `nodekit
// agent` runs: kubelet, node status, kubelet server, probe manager; the service proxy off) runs in a
// child process (this benchmark binary re-executed, see TestMain) against the real API server (embedded
// etcd + nodekit apiserver) in this one, so its RSS is its own.
//
//	go test -bench . -benchtime 1x ./bench/kubelet/
//
// bench/kubelet/cycles.sh runs the 200 create/delete cycle leak check.
package kubelet_bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/images/bundled"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const (
	batch   = 30
	maxPods = 110
)

func suffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type setup struct {
	rt     *containerd.Runtime
	client kubernetes.Interface
	node   string
	// kubeletPID is the agent's process (a child).
	kubeletPID int
	// stopKubelet stops the kubelet (before the raw-CRI floor runs: a kubelet rightly removes pods
	// made behind its back).
	stopKubelet func()
}

func start(b *testing.B) *setup {
	s := &setup{node: "bench-" + suffix()}
	cgroupRoot := fwagent.CgroupRoot(b, s.node) // removed last, after containerd removed the pods
	s.rt = containerd.Start(b, containerd.Options{})
	api := apiserver.Start(b, apiserver.Options{})
	// The bench's own client must not be throttled (client-go's default is 5 QPS).
	admin := rest.CopyConfig(api.Config)
	admin.QPS, admin.Burst = 200, 200
	s.client = kubernetes.NewForConfigOrDie(admin)
	cfg := fwagent.Config(b, s.node, s.rt, api)
	cfg.Kubelet.CgroupRoot = cgroupRoot
	s.runChild(b, cfg)
	return s
}

// childEnv carries the child's agent.Config as JSON.
const childEnv = "NODEKIT_BENCH_KUBELET_CHILD"

// TestMain runs the agent instead of the benchmarks when started as the benchmark's child.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(agentChild(spec))
	}
	os.Exit(m.Run())
}

// agentChild runs the agent of the JSON agent.Config until SIGTERM, logging warnings and errors only;
// it returns the exit code.
func agentChild(spec string) int {
	var cfg agent.Config
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent child:", err)
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent child:", err)
		return 1
	}
	return 0
}

// runChild starts the agent in a child process; stopKubelet sends it SIGTERM and reaps it (SIGKILL
// after 30 s).
func (s *setup) runChild(b *testing.B, cfg agent.Config) {
	js, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s.kubeletPID = cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	s.stopKubelet = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	b.Cleanup(s.stopKubelet)
}

// memoryKiB reads VmRSS (resident now) and VmHWM (peak resident) of process pid from
// /proc/<pid>/status, in KiB.
func memoryKiB(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var v int64
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &v); n == 1 {
			rss = v
		} else if n, _ := fmt.Sscanf(line, "VmHWM: %d kB", &v); n == 1 {
			hwm = v
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return rss, hwm, nil
}

func (s *setup) pod(name string) *v1.Pod {
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-" + suffix())},
		Spec: v1.PodSpec{NodeName: s.node, TerminationGracePeriodSeconds: &grace, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent}}},
	}
}

func isRunning(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// startPods creates the pods at once and returns each one's create → Running latency seen by a watch.
func (s *setup) startPods(b *testing.B, names []string) []time.Duration {
	ctx := context.Background()
	w, err := s.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	created := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			t0 := time.Now()
			if _, err := s.client.CoreV1().Pods("default").Create(ctx, s.pod(n), metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			created[n] = t0
			mu.Unlock()
		}(n)
	}
	var lat []time.Duration
	seen := map[string]bool{}
	timeout := time.After(5 * time.Minute)
	for len(lat) < len(names) {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted || seen[p.Name] || !isRunning(p) {
				continue
			}
			now := time.Now()
			wg.Wait()
			mu.Lock()
			t0, ok := created[p.Name]
			mu.Unlock()
			if ok {
				seen[p.Name] = true
				lat = append(lat, now.Sub(t0))
			}
		case <-timeout:
			b.Fatalf("only %d of %d pods Running after 5 min", len(lat), len(names))
		}
	}
	wg.Wait()
	return lat
}

// deletePods deletes the pods and waits until they are gone from the API (the kubelet finishing the
// deletion after stopping them).
func (s *setup) deletePods(b *testing.B, names []string) {
	ctx := context.Background()
	for _, n := range names {
		if err := s.client.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// waitRuntimeEmpty waits until the kubelet removed every pod from the runtime.
func (s *setup) waitRuntimeEmpty(b *testing.B) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sbs, err := s.rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			b.Fatal(err)
		}
		if len(sbs.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d sandboxes still in the runtime 2 min after deleting the pods", len(sbs.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rawCRI starts n sandbox+container pairs directly through CRI (in parallel) and returns each latency.
func (s *setup) rawCRI(b *testing.B, n int) []time.Duration {
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t0 := time.Now()
			sb := s.rt.SandboxConfig(fmt.Sprintf("raw-%d-%s", i, suffix()), "raw")
			id, ip := s.rt.RunSandbox(b, sb)
			s.rt.StartContainer(b, id, sb, containerd.DemoContainerConfig("demo", bundled.DemoServerV1, sb, ip))
			lat[i] = time.Since(t0)
		}(i)
	}
	wg.Wait()
	// Remove them so they do not load the following measurements.
	ctx := context.Background()
	sbs, err := s.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": "raw"}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, sb := range sbs.Items {
		_, _ = s.rt.CRI.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
		_, _ = s.rt.CRI.Runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
	}
	return lat
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkPodStartLatency prints, for nodekit's kubelet and the raw-CRI floor: one pod at a time (10
// rounds) and a batch of 30 pods created together, p50 and p99 of the start latency.
func BenchmarkPodStartLatency(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for containerd")
	}
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: each iteration is a full measurement round and the kubelet stops after it")
	}
	s := start(b)
	// Warm up: image unpacked, first sandbox, informers synced.
	s.startPods(b, []string{"warmup"})
	s.deletePods(b, []string{"warmup"})
	for i := 0; i < b.N; i++ {
		var single []time.Duration
		for r := 0; r < 10; r++ {
			name := fmt.Sprintf("single-%d-%d", i, r)
			single = append(single, s.startPods(b, []string{name})...)
			s.deletePods(b, []string{name})
		}
		var names []string
		for j := 0; j < batch; j++ {
			names = append(names, fmt.Sprintf("batch-%d-%02d", i, j))
		}
		batchLat := s.startPods(b, names)
		s.deletePods(b, names)
		s.waitRuntimeEmpty(b)

		// Node fill: 110 pods (the kubelet's default maxPods) created together.
		var fill []string
		for j := 0; j < maxPods; j++ {
			fill = append(fill, fmt.Sprintf("fill-%d-%03d", i, j))
		}
		fillStart := time.Now()
		fillLat := s.startPods(b, fill)
		fillTook := time.Since(fillStart)
		// The agent's memory with the node full: after a few PLEG relists and status syncs at 110 pods.
		time.Sleep(5 * time.Second)
		rss, hwm, err := memoryKiB(s.kubeletPID)
		if err != nil {
			b.Fatal(err)
		}
		s.deletePods(b, fill)
		s.waitRuntimeEmpty(b)
		s.stopKubelet()

		var rawSingle []time.Duration
		for r := 0; r < 10; r++ {
			rawSingle = append(rawSingle, s.rawCRI(b, 1)...)
		}
		rawBatch := s.rawCRI(b, batch)

		fmt.Printf("\npod start latency (image present), %d CPUs\n", runtime.NumCPU())
		fmt.Printf("%-28s %10s %10s   %10s %10s\n", "", "1 pod p50", "1 pod p99", "30 p50", "30 p99")
		fmt.Printf("%-28s %10v %10v   %10v %10v\n", "nodekit kubelet (API→Running)", r(pct(single, .5)), r(pct(single, .99)), r(pct(batchLat, .5)), r(pct(batchLat, .99)))
		fmt.Printf("%-28s %10v %10v   %10v %10v\n", "raw CRI floor (runp+create+start)", r(pct(rawSingle, .5)), r(pct(rawSingle, .99)), r(pct(rawBatch, .5)), r(pct(rawBatch, .99)))
		fmt.Printf("node fill: %d pods created together all Running after %v (per pod p50 %v, p99 %v)\n",
			maxPods, r(fillTook), r(pct(fillLat, .5)), r(pct(fillLat, .99)))
		fmt.Printf("agent RSS at %d pods: %.1f MiB (peak %.1f MiB; agent child process)\n", maxPods, float64(rss)/1024, float64(hwm)/1024)
		b.ReportMetric(float64(rss)/1024, "MiB-agent-RSS-110pods")
		b.ReportMetric(float64(pct(single, .5).Milliseconds()), "ms-p50-1pod")
		b.ReportMetric(float64(pct(batchLat, .99).Milliseconds()), "ms-p99-30pods")
	}
}

func r(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
