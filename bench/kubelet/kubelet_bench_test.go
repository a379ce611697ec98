// Package kubelet_bench measures nodekit's agent with pods that carry what real pods carry (a projected
// service-account token volume and a readiness probe).
//
// BenchmarkPodStartLatency: pod created in the API → Ready, as seen through a watch, for one pod at a
// time and for a batch of 30 created together, with the image already present; and, in the same run
// against the same containerd, the raw-CRI floor: RunPodSandbox + CreateContainer + StartContainer of the
// same image with no kubelet and no API, also up to the container's first answer on the probed path. It
// prints p50/p99 side by side, then the time to fill the node with 110 pods.
//
// BenchmarkAgentMemory: the agent's resident memory and Go heap at 0, 30 and 110 pods next to upstream's
// kubelet + kube-proxy, where the resident memory goes, and the heap profile's top.
//
// The agent (agent.Run, what `nodekit agent` runs: kubelet, node status, kubelet server, probe manager;
// the service proxy in the memory benchmark) runs in a child process (this benchmark binary re-executed,
// see TestMain) against the real API server (embedded etcd + nodekit apiserver) in this one, so its RSS
// is its own.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/kubelet/
//
// NODEKIT_BENCH_TRACE=<file> also prints when each step of a pod's start happened (see printSteps).
//
// bench/kubelet/cycles.sh runs the 200 create/delete cycle leak check.
package kubelet_bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/images/bundled"
	rtcontainerd "github.com/nodekit/nodekit/runtime/containerd"
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
	admin  *rest.Config
	client kubernetes.Interface
	node   string
	// kubeletAddr is the agent's kubelet server (host:port).
	kubeletAddr string
	// kubeletPID is the agent's process (a child).
	kubeletPID int
	// stopKubelet stops the kubelet (before the raw-CRI floor runs: a kubelet rightly removes pods
	// made behind its back).
	stopKubelet func()
}

// start runs the API server in this process and the agent in a child; withProxy runs the agent's service
// proxy too, writing its rules in a network namespace of its own (the host's tables stay untouched).
func start(b *testing.B, withProxy bool) *setup {
	s := &setup{node: "bench-" + suffix()}
	cgroupRoot := fwagent.CgroupRoot(b, s.node) // removed last, after containerd removed the pods
	s.rt = containerd.Start(b, containerd.Options{})
	api := apiserver.Start(b, apiserver.Options{})
	// The bench's own client must not be throttled (client-go's default is 5 QPS).
	admin := rest.CopyConfig(api.Config)
	admin.QPS, admin.Burst = 200, 200
	s.admin = admin
	s.client = kubernetes.NewForConfigOrDie(admin)
	s.podAccess(b)
	cfg := fwagent.Config(b, s.node, s.rt, api)
	cfg.Kubelet.CgroupRoot = cgroupRoot
	s.kubeletAddr = fmt.Sprintf("%s:%d", cfg.Kubelet.Address, cfg.Kubelet.Port)
	var env []string
	if withProxy {
		proxyNS, err := testutils.NewNS()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = testutils.UnmountNS(proxyNS) }) // after the child stopped (cleanups run last first)
		cfg.DisableProxy, cfg.ProxyMetricsAddr, cfg.ProxyHealthzAddr = false, "127.0.0.1:0", "127.0.0.1:0"
		env = append(env, proxyNetNSEnv+"="+proxyNS.Path())
	}
	// A failed round leaves its pods running and their volumes mounted in the data dir: detach them after
	// the child stopped, before the data dir is removed.
	b.Cleanup(func() {
		if err := rtcontainerd.UnmountAll(cfg.DataDir); err != nil {
			b.Error(err)
		}
	})
	s.runChild(b, cfg, env...)
	return s
}

// podAccess creates what a pod's service-account token volume reads in namespace default (the test API
// server runs no controllers): the ServiceAccount "default" and the ConfigMap kube-root-ca.crt.
func (s *setup) podAccess(b *testing.B) {
	ctx := context.Background()
	ca := s.admin.TLSClientConfig.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(s.admin.TLSClientConfig.CAFile); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	if _, err := s.client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": string(ca)}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
}

// childEnv carries the child's agent.Config as JSON.
const childEnv = "NODEKIT_BENCH_KUBELET_CHILD"

// proxyNetNSEnv, when set in the child, is the path of the network namespace its service proxy writes in.
const proxyNetNSEnv = "NODEKIT_BENCH_PROXY_NETNS"

// traceEnv, when set (a file path), makes the child log at debug level to that file: its timestamped
// lines are the steps of each pod's start, which the benchmark prints (see printSteps).
const traceEnv = "NODEKIT_BENCH_TRACE"

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
	if p := os.Getenv(proxyNetNSEnv); p != "" {
		netns, err := ns.GetNS(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent child:", err)
			return 2
		}
		defer netns.Close()
		cfg.ProxyNetNS = netns
	}
	var logOut io.Writer = os.Stderr
	level := slog.LevelWarn
	if path := os.Getenv(traceEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent child:", err)
			return 2
		}
		defer f.Close()
		logOut, level = f, slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level})))
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
func (s *setup) runChild(b *testing.B, cfg agent.Config, env ...string) {
	js, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+string(js)), env...)
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

// pod is what real pods carry: the service-account token volume the ServiceAccount admission plugin
// adds (kube-api-access: a projected token, the cluster CA, the namespace) and a readiness probe.
func (s *setup) pod(name string) *v1.Pod {
	grace, expiry, mode := int64(1), int64(3607), int32(0o644)
	access := v1.Volume{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-" + suffix())},
		Spec: v1.PodSpec{NodeName: s.node, TerminationGracePeriodSeconds: &grace, RestartPolicy: v1.RestartPolicyAlways,
			ServiceAccountName: "default", Volumes: []v1.Volume{access},
			Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent,
				VolumeMounts: []v1.VolumeMount{{Name: access.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 10}}}},
	}
}

// isReady: Running, every container running, and the Ready condition True (the readiness probe passed).
func isReady(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// startPods creates the pods at once and returns each one's create → Ready latency seen by a watch.
func (s *setup) startPods(b *testing.B, names []string) []time.Duration {
	ctx := context.Background()
	w, err := s.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { w.Stop() }()
	created := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			mu.Lock()
			created[n] = time.Now() // before the create: its Ready event may come before Create returns
			mu.Unlock()
			if _, err := s.client.CoreV1().Pods("default").Create(ctx, s.pod(n), metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}(n)
	}
	var lat []time.Duration
	seen := map[string]bool{}
	events := 0
	timeout := time.After(5 * time.Minute)
	for len(lat) < len(names) {
		select {
		case ev, open := <-w.ResultChan():
			if !open { // the server ended the watch: go on from the last state seen
				if w, err = s.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
				continue
			}
			events++
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted || seen[p.Name] || !isReady(p) {
				continue
			}
			now := time.Now()
			mu.Lock()
			t0, ok := created[p.Name]
			mu.Unlock()
			if ok {
				seen[p.Name] = true
				lat = append(lat, now.Sub(t0))
			}
		case <-timeout:
			b.Fatalf("only %d of %d pods Ready after 5 min (%d watch events)", len(lat), len(names), events)
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

// rawCRI starts n sandbox+container pairs directly through CRI (in parallel) and returns each one's
// latency to StartContainer returning (started) and to the container's first 200 on /readyz, polled
// every 5 ms (answering: the floor of a readiness probe).
func (s *setup) rawCRI(b *testing.B, n int) (started, answering []time.Duration) {
	started, answering = make([]time.Duration, n), make([]time.Duration, n)
	client := &http.Client{Timeout: time.Second}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t0 := time.Now()
			sb := s.rt.SandboxConfig(fmt.Sprintf("raw-%d-%s", i, suffix()), "raw")
			id, ip := s.rt.RunSandbox(b, sb)
			s.rt.StartContainer(b, id, sb, containerd.DemoContainerConfig("demo", bundled.DemoServerV1, sb, ip))
			started[i] = time.Since(t0)
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if resp, err := client.Get("http://" + ip + ":8080/readyz"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						answering[i] = time.Since(t0)
						return
					}
				}
			}
			b.Errorf("raw pod %s: no 200 from /readyz within 30 s", sb.Metadata.Name)
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
	return started, answering
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkPodStartLatency prints, for nodekit's kubelet and the raw-CRI floor: one pod at a time (10
// rounds) and a batch of 30 pods created together, p50 and p99 of the start latency, then the 110-pod
// node fill. The pods carry a service-account token volume and a readiness probe, and count as started
// once Ready; the floor is measured both to StartContainer and to the container's first 200 on the
// probed path.
func BenchmarkPodStartLatency(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for containerd")
	}
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: each iteration is a full measurement round and the kubelet stops after it")
	}
	s := start(b, false)
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
		s.deletePods(b, fill)
		s.waitRuntimeEmpty(b)
		s.stopKubelet()

		var rawSingle, rawSingleReady []time.Duration
		for r := 0; r < 10; r++ {
			st, rd := s.rawCRI(b, 1)
			rawSingle, rawSingleReady = append(rawSingle, st...), append(rawSingleReady, rd...)
		}
		rawBatch, rawBatchReady := s.rawCRI(b, batch)

		fmt.Printf("\npod start latency (image present; pods with a projected service-account token and a readiness probe), %d CPUs\n", runtime.NumCPU())
		fmt.Printf("%-40s %10s %10s   %10s %10s\n", "", "1 pod p50", "1 pod p99", "30 p50", "30 p99")
		row := func(name string, one, thirty []time.Duration) {
			fmt.Printf("%-40s %10v %10v   %10v %10v\n", name, r(pct(one, .5)), r(pct(one, .99)), r(pct(thirty, .5)), r(pct(thirty, .99)))
		}
		row("nodekit kubelet (API→Ready)", single, batchLat)
		row("raw CRI floor (runp+create+start)", rawSingle, rawBatch)
		row("raw CRI floor + first 200 on /readyz", rawSingleReady, rawBatchReady)
		ratio := func(a, f []time.Duration) float64 { return float64(pct(a, .5)) / float64(pct(f, .5)) }
		fmt.Printf("p50 ratio to the floor: 1 pod %.2f× (to start) %.2f× (to answering); 30 pods %.2f× / %.2f× (goal ≤ 1.05×)\n",
			ratio(single, rawSingle), ratio(single, rawSingleReady), ratio(batchLat, rawBatch), ratio(batchLat, rawBatchReady))
		fmt.Printf("node fill: %d pods created together all Ready after %v (per pod p50 %v, p99 %v)\n",
			maxPods, r(fillTook), r(pct(fillLat, .5)), r(pct(fillLat, .99)))
		if path := os.Getenv(traceEnv); path != "" {
			for _, prefix := range []string{"single-", "batch-"} {
				if err := printSteps(path, prefix); err != nil {
					b.Error(err)
				}
			}
		}
		b.ReportMetric(float64(pct(single, .5).Milliseconds()), "ms-p50-1pod")
		b.ReportMetric(float64(pct(batchLat, .99).Milliseconds()), "ms-p99-30pods")
	}
}

func r(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
