package kubelet_bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Upstream's figures at 110 pods on this kind of machine (issue 20: kubelet and kube-proxy v1.37.2).
const (
	upstreamKubeletMiB = 134
	upstreamProxyMiB   = 61
	goalMiB            = 49
)

// memSample is the agent's memory at one pod count.
type memSample struct {
	pods int
	// From /proc/<pid>/status, KiB: resident in total, anonymous, file-backed.
	rss, anon, file int64
	// mappings is Rss by mapping kind from /proc/<pid>/smaps, KiB.
	mappings map[string]int64
	// From the Go runtime (the heap profile's MemStats), bytes.
	heapInuse, heapIdle, heapReleased, stackInuse, sys, nextGC int64
	goroutines                                                 int
	profile                                                    string // heap profile file
}

// BenchmarkAgentMemory prints the agent's resident memory (kubelet and service proxy in one process, as
// `nodekit agent` runs) and its Go heap at 0, 30 and 110 Ready pods (each with a service-account token
// volume and a readiness probe), next to upstream's kubelet + kube-proxy, then where the resident
// memory goes (/proc/<pid>/smaps by mapping) and the top of the heap profile at 110 pods. The proxy
// writes its rules in a network namespace of its own.
//
//	go test -run '^$' -bench AgentMemory -benchtime 1x ./bench/kubelet/
//
// $NODEKIT_BENCH_PROFILE_DIR keeps the heap profiles (heap-<pods>pods.pb.gz) for go tool pprof;
// $GOMEMLIMIT reaches the agent (whose --go-memory-limit is unset by default).
func BenchmarkAgentMemory(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for containerd")
	}
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: each iteration is a full measurement round")
	}
	s := start(b, true)
	prof := newProfiler(b, s.admin, s.kubeletAddr)
	out := os.Getenv("NODEKIT_BENCH_PROFILE_DIR") // keeps the heap profiles; default: removed after the run
	if out == "" {
		out = b.TempDir()
	}
	// The node registered and the kubelet serving; then a pod round trip so that every code path a pod
	// takes has run once (as on a node that has been up a while).
	s.startPods(b, []string{"warmup"})
	s.deletePods(b, []string{"warmup"})
	s.waitRuntimeEmpty(b)
	var samples []memSample
	var names []string
	for _, n := range []int{0, batch, maxPods} {
		var more []string
		for j := len(names); j < n; j++ {
			more = append(more, fmt.Sprintf("mem-%03d", j))
		}
		if len(more) > 0 {
			s.startPods(b, more)
			names = append(names, more...)
		}
		// A few PLEG relists, probe periods and status syncs at this pod count, then the figures.
		time.Sleep(15 * time.Second)
		samples = append(samples, prof.sample(b, s.kubeletPID, n, out))
	}
	s.deletePods(b, names)
	s.waitRuntimeEmpty(b)

	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	bmib := func(bytes int64) float64 { return float64(bytes) / (1 << 20) }
	fmt.Printf("\nagent memory (kubelet + service proxy in one process; GOMEMLIMIT=%q GOGC=%q)\n", os.Getenv("GOMEMLIMIT"), os.Getenv("GOGC"))
	fmt.Printf("%5s %9s %9s %9s   %10s %9s %9s %9s %7s %10s\n", "pods", "VmRSS", "RssAnon", "RssFile", "HeapInuse", "HeapIdle", "Released", "Stacks", "gorout", "NextGC")
	for _, m := range samples {
		fmt.Printf("%5d %8.1fM %8.1fM %8.1fM   %9.1fM %8.1fM %8.1fM %8.1fM %7d %9.1fM\n", m.pods, mib(m.rss), mib(m.anon), mib(m.file),
			bmib(m.heapInuse), bmib(m.heapIdle), bmib(m.heapReleased), bmib(m.stackInuse), m.goroutines, bmib(m.nextGC))
	}
	last := samples[len(samples)-1]
	fmt.Printf("upstream at 110 pods: kubelet %d MiB + kube-proxy %d MiB = %d MiB; nodekit agent %.1f MiB (%.2f×); goal ≤ %d MiB\n",
		upstreamKubeletMiB, upstreamProxyMiB, upstreamKubeletMiB+upstreamProxyMiB, mib(last.rss), mib(last.rss)/(upstreamKubeletMiB+upstreamProxyMiB), goalMiB)
	fmt.Printf("\nresident memory by mapping at %d pods (/proc/<pid>/smaps):\n", last.pods)
	kinds := make([]string, 0, len(last.mappings))
	for k := range last.mappings {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return last.mappings[kinds[i]] > last.mappings[kinds[j]] })
	for _, k := range kinds {
		fmt.Printf("  %8.1f MiB  %s\n", mib(last.mappings[k]), k)
	}
	if top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", "-sample_index=inuse_space", last.profile).CombinedOutput(); err == nil {
		fmt.Printf("\nheap profile at %d pods (in use):\n%s", last.pods, top)
	} else {
		fmt.Printf("\ngo tool pprof: %v\n%s", err, top)
	}
	b.ReportMetric(mib(last.rss), "MiB-agent-RSS-110pods")
	b.ReportMetric(bmib(last.heapInuse), "MiB-heap-inuse-110pods")
}

// profiler reads the agent's Go profiles from its kubelet server (/debug/pprof/, client-certificate
// authenticated: the bench's admin certificate, system:masters).
type profiler struct {
	client *http.Client
	base   string
}

func newProfiler(b *testing.B, admin *rest.Config, addr string) *profiler {
	tc, err := rest.TLSConfigFor(admin)
	if err != nil {
		b.Fatal(err)
	}
	if tc == nil || (len(admin.TLSClientConfig.CertData) == 0 && admin.TLSClientConfig.CertFile == "") {
		b.Fatal("the admin config has no client certificate; the kubelet server authenticates by certificate only")
	}
	tc = tc.Clone()
	// The kubelet serves a self-signed certificate for its node name and IP; this is loopback and a
	// benchmark, so the server is not verified (the client certificate still is).
	tc.InsecureSkipVerify, tc.RootCAs = true, nil
	return &profiler{client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc}},
		base: "https://" + addr}
}

func (p *profiler) get(b *testing.B, path string) []byte {
	resp, err := p.client.Get(p.base + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v %.300s", path, resp.StatusCode, err, body)
	}
	return body
}

// sample reads the agent's resident memory and Go memory statistics, and saves its heap profile in dir.
// RSS is read first, so the profiler's own allocations do not count.
func (p *profiler) sample(b *testing.B, pid, pods int, dir string) memSample {
	m := memSample{pods: pods}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = v
		case "RssAnon:":
			m.anon = v
		case "RssFile:":
			m.file = v
		}
	}
	if m.mappings, err = smapsByKind(pid); err != nil {
		b.Fatal(err)
	}
	// debug=1: the text profile, ending with the runtime's MemStats ("# HeapInuse = 123").
	stats := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(p.get(b, "/debug/pprof/heap?debug=1")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var k string
		var v int64
		if n, _ := fmt.Sscanf(sc.Text(), "# %s = %d", &k, &v); n == 2 {
			stats[k] = v
		}
		// "# Stack = 1234 / 5678": in use / from the OS.
		if n, _ := fmt.Sscanf(sc.Text(), "# Stack = %d", &v); n == 1 {
			m.stackInuse = v
		}
	}
	m.heapInuse, m.heapIdle, m.heapReleased, m.sys, m.nextGC = stats["HeapInuse"], stats["HeapIdle"], stats["HeapReleased"], stats["Sys"], stats["NextGC"]
	if m.heapInuse == 0 {
		b.Fatal("the heap profile has no MemStats (HeapInuse)")
	}
	var total int
	if n, _ := fmt.Sscanf(string(p.get(b, "/debug/pprof/goroutine?debug=1")), "goroutine profile: total %d", &total); n == 1 {
		m.goroutines = total
	}
	m.profile = filepath.Join(dir, fmt.Sprintf("heap-%dpods.pb.gz", pods))
	if err := os.WriteFile(m.profile, p.get(b, "/debug/pprof/heap"), 0o644); err != nil {
		b.Fatal(err)
	}
	return m
}

// smapsByKind sums the Rss of process pid's mappings (KiB) by kind: the executable's text, read-only
// data and writable data, the Go heap and other anonymous memory, shared libraries, stacks.
func smapsByKind(pid int) (map[string]int64, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	kind := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") || strings.Contains(fields[0], "-") { // a mapping's header line
			perms, path := fields[1], ""
			if len(fields) >= 6 {
				path = fields[5]
			}
			switch {
			case path == exe && strings.Contains(perms, "x"):
				kind = "executable: text"
			case path == exe && strings.Contains(perms, "w"):
				kind = "executable: data (writable)"
			case path == exe:
				kind = "executable: read-only data (rodata, pclntab, type info)"
			case path == "":
				kind = "anonymous: Go heap, stacks, bss, runtime metadata"
			case path == "[heap]", path == "[stack]":
				kind = "anonymous: " + path
			case strings.HasPrefix(path, "["):
				kind = "kernel: " + path
			default:
				kind = "other files: " + filepath.Base(path)
			}
			continue
		}
		if fields[0] == "Rss:" {
			v, _ := strconv.ParseInt(fields[1], 10, 64)
			out[kind] += v
		}
	}
	return out, sc.Err()
}
