// Command apiserver-bench measures nodekit's API server: create→watch-event latency, the time to list
// N pods, and the server's resident memory with N pods stored. It builds nodekit, runs `nodekit server`
// as its own process on loopback with a temporary data dir, and prints the figures.
//
//	go run ./bench/apiserver -pods 10000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/server"
)

func main() {
	pods := flag.Int("pods", 10000, "pods to store before listing and measuring memory")
	samples := flag.Int("latency-samples", 500, "create→watch latency samples")
	workers := flag.Int("workers", 16, "concurrent creators")
	flag.Parse()
	if err := run(*pods, *samples, *workers); err != nil {
		log.Fatal(err)
	}
}

func run(nPods, nSamples, workers int) error {
	tmp, err := os.MkdirTemp("", "nodekit-apiserver-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "nodekit")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nodekit/nodekit/cmd/nodekit").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	apiPort, etcdPort := freePort(), freePort()
	sc := server.Config{DataDir: tmp, APIServer: apiserver.Options{BindAddress: "127.0.0.1", Port: apiPort},
		Etcd: etcd.Config{ClientAddr: "127.0.0.1:" + strconv.Itoa(etcdPort)}}
	srv := exec.Command(bin, append([]string{"--data-dir", tmp, server.CommandName}, sc.Args()...)...)
	logf, _ := os.Create(filepath.Join(tmp, "server.log"))
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _, _ = srv.Process.Wait() }()
	c, err := waitClient(sc.Paths().AdminKubeconfig)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("nodekit apiserver bench: %d pods, %d latency samples, %d workers\n", nPods, nSamples, workers)
	fmt.Printf("server RSS at start: %.1f MiB\n", rssMiB(srv.Process.Pid))

	// create→watch latency: one create at a time, timed until its ADDED event arrives on an open watch.
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	lat := make([]time.Duration, 0, nSamples)
	for i := 0; i < nSamples; i++ {
		name := fmt.Sprintf("lat-%05d", i)
		start := time.Now()
		if _, err := c.CoreV1().Pods("default").Create(ctx, podObj(name), metav1.CreateOptions{}); err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added && ev.Object.(*corev1.Pod).Name == name {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	w.Stop()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("create→watch event latency: p50 %v  p99 %v  max %v\n", lat[len(lat)/2].Round(time.Microsecond),
		lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))

	// fill up to nPods
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, workers)
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := c.CoreV1().Pods("default").Create(ctx, podObj(fmt.Sprintf("pod-%05d", i)), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := nSamples; i < nPods; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	created := nPods - nSamples
	el := time.Since(start)
	fmt.Printf("created %d pods in %v (%.0f creates/s with %d workers)\n", created, el.Round(time.Millisecond), float64(created)/el.Seconds(), workers)

	for _, rv := range []string{"", "0"} {
		var best time.Duration
		var n int
		for r := 0; r < 3; r++ {
			t0 := time.Now()
			l, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				return err
			}
			if d := time.Since(t0); best == 0 || d < best {
				best = d
			}
			n = len(l.Items)
		}
		what := "consistent (resourceVersion=\"\")"
		if rv == "0" {
			what = "from watch cache (resourceVersion=0)"
		}
		fmt.Printf("list %d pods, %s: best of 3 %v\n", n, what, best.Round(time.Millisecond))
	}
	fmt.Printf("server RSS with %d pods: %.1f MiB (nodekit server process: etcd + apiserver)\n", nPods, rssMiB(srv.Process.Pid))
	return nil
}

func podObj(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return -1
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitClient(kubeconfig string) (*kubernetes.Clientset, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
			cfg.QPS, cfg.Burst = 5000, 5000
			c := kubernetes.NewForConfigOrDie(cfg)
			if body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
				if _, err := c.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
					return c, nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("server not ready")
}
