package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/kubelet/processpods"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/runtime/cri"
)

// get sends one GET to the demo Service from the node's network namespace (a new connection each time,
// so the proxy's load-balancing applies) and wants the demo server's 200 answer.
func (e *env) get() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{DialContext: e.dial, DisableKeepAlives: true, Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), "demo-server ") {
		return fmt.Errorf("GET %s: %s %q", e.url, resp.Status, b)
	}
	return nil
}

// probeInterval and probeTimeout bound the availability probe: at most one request in flight, one every
// 200 ms, each given 1 s, so a 2-minute window sends at most 600; maxProbes (100 min of probing) covers
// the longest fault, 1000 pod cycles within their 90-minute bound.
const (
	probeInterval = 200 * time.Millisecond
	probeTimeout  = time.Second
	maxProbes     = 30000
)

type sample struct {
	at time.Time
	ok bool
}

// prober sends GETs to the demo Service's ClusterIP from the host's network namespace.
type prober struct {
	mu      sync.Mutex
	samples []sample
	stopc   chan struct{}
	done    chan struct{}
}

func (e *env) probe() *prober {
	p := &prober{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; i < maxProbes; i++ {
			at := time.Now()
			err := e.get()
			p.mu.Lock()
			p.samples = append(p.samples, sample{at, err == nil})
			p.mu.Unlock()
			select {
			case <-p.stopc:
				return
			case <-time.After(time.Until(at.Add(probeInterval))):
			}
		}
	}()
	return p
}

// figure is one fault's availability: requests answered / sent during the fault (from its start to its
// end, e.g. the resume) and after it, and the time from the fault's end until the Service answered again
// for good (0 if it never failed after the end).
type figure struct {
	duringOK, during, afterOK, after int
	recovery                         time.Duration
	lastFailure                      time.Time
}

func (f figure) String() string {
	pct := func(a, b int) float64 {
		if b == 0 {
			return 100
		}
		return 100 * float64(a) / float64(b)
	}
	return fmt.Sprintf("during %d/%d answered (%.1f%%), after %d/%d (%.1f%%), recovered %.1fs after the fault ended",
		f.duringOK, f.during, pct(f.duringOK, f.during), f.afterOK, f.after, pct(f.afterOK, f.after), f.recovery.Seconds())

}

// stop ends the probe and computes the figure for a fault from start to end.
func (p *prober) stop(start, end time.Time) figure {
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	var f figure
	for _, s := range p.samples {
		switch {
		case s.at.Before(start):
		case s.at.Before(end):
			f.during++
			if s.ok {
				f.duringOK++
			}
		default:
			f.after++
			if s.ok {
				f.afterOK++
			}
		}
		if !s.ok {
			f.lastFailure = s.at
		}
	}
	if f.lastFailure.After(end) {
		f.recovery = f.lastFailure.Add(probeInterval).Sub(end)
	}
	return f
}

// leaks lists what this cluster holds for pods or Services that no longer exist: CRI sandboxes of no live
// pod (and not exactly one ready sandbox per live pod), network namespaces holding an address of the pod
// range that no live pod has, IPAM reservations of no live pod, iptables rules naming a pod IP or
// ClusterIP of no live pod or Service, mounts of removed pods or sandboxes, pod cgroups and pod log dirs
// of removed pods.
func (e *env) leaks(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing pods: " + err.Error()}
	}
	svcs, err := e.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing services: " + err.Error()}
	}
	live, liveIPs, liveSvcIPs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != e.nodeName {
			continue
		}
		live[string(p.UID)] = true
		for _, ip := range p.Status.PodIPs {
			liveIPs[ip.IP] = true
		}
	}
	for _, s := range svcs.Items {
		for _, ip := range s.Spec.ClusterIPs {
			liveSvcIPs[ip] = true
		}
	}

	// CRI sandboxes.
	rt, err := cri.Dial(ctx, "unix://"+agent.Config{DataDir: e.dataDir}.Paths().ContainerdSocket)
	if err != nil {
		return []string{"CRI: " + err.Error()}
	}
	defer rt.Close()
	sbs, err := rt.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return []string{"CRI ListPodSandbox: " + err.Error()}
	}
	readyPer := map[string]int{}
	liveSandboxes := map[string]bool{}
	for _, sb := range sbs.Items {
		uid := sb.Metadata.Uid
		liveSandboxes[sb.Id] = true
		if !live[uid] {
			out = append(out, fmt.Sprintf("sandbox %s (%s) of removed pod %s/%s", sb.Id[:12], sb.State, sb.Metadata.Namespace, sb.Metadata.Name))
		} else if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			readyPer[uid]++
		}
	}
	for _, p := range pods.Items {
		if p.Annotations[static.ConfigSourceAnnotation] == processpods.Source {
			continue // a control-plane component's pod: a process on the node, with no sandbox
		}
		if p.Spec.NodeName == e.nodeName && p.DeletionTimestamp == nil && p.Status.Phase == "Running" && readyPer[string(p.UID)] != 1 {
			out = append(out, fmt.Sprintf("pod %s has %d ready sandboxes, want 1", p.Name, readyPer[string(p.UID)]))
		}
	}

	// IPAM reservations: every file under <data>/cni named by an address of the pod range.
	_ = filepath.WalkDir(filepath.Join(e.dataDir, "cni"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if ip := net.ParseIP(d.Name()); ip != nil && e.podNet.Contains(ip) && !liveIPs[d.Name()] && filepath.Base(filepath.Dir(path)) != "last" {
			out = append(out, "IPAM reservation "+path+" of no live pod")
		}
		return nil
	})

	// Network namespaces holding an address of the pod range no live pod has.
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, n := range ents {
			if n.Name() == filepath.Base(e.node.NS.Path()) {
				continue // the node's own namespace (its bridge holds the pod range's gateway)
			}
			b, err := exec.Command("ip", "-n", n.Name(), "-o", "-4", "addr", "show").CombinedOutput()
			if err != nil {
				continue
			}
			for _, m := range regexp.MustCompile(`inet (\d+\.\d+\.\d+\.\d+)/`).FindAllStringSubmatch(string(b), -1) {
				if e.podNet.Contains(net.ParseIP(m[1])) && !liveIPs[m[1]] {
					out = append(out, fmt.Sprintf("netns %s holds %s, no live pod's IP", n.Name(), m[1]))
				}
			}
		}
	}

	// iptables rules naming a pod IP or ClusterIP that is gone.
	if save, err := e.node.Command(context.Background(), "iptables-save").CombinedOutput(); err == nil {
		seen := map[string]bool{}
		for _, m := range regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+)(/32)?\b`).FindAllStringSubmatch(string(save), -1) {
			ip := net.ParseIP(m[1])
			if ip == nil || seen[m[1]] || (m[2] == "" && strings.HasSuffix(m[1], ".0")) {
				continue
			}
			seen[m[1]] = true
			switch {
			case e.podNet.Contains(ip) && !liveIPs[m[1]] && ip.To4()[3] != 1: // .1: a node bridge's gateway
				out = append(out, "iptables rule naming pod IP "+m[1]+" of no live pod")
			case e.serviceNet.Contains(ip) && !liveSvcIPs[m[1]]:
				out = append(out, "iptables rule naming ClusterIP "+m[1]+" of no live Service")
			}
		}
	}

	// Mounts under the data dir of removed pods (kubelet volumes) or sandboxes (shm).
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		podRE := regexp.MustCompile(`/kubelet/pods/([0-9a-f-]{36})/`)
		sbRE := regexp.MustCompile(`/sandboxes/([0-9a-f]{64})/`)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, e.dataDir) {
				continue
			}
			if m := podRE.FindStringSubmatch(line); m != nil && !live[m[1]] {
				out = append(out, "mount of removed pod "+m[1]+": "+line)
			}
			if m := sbRE.FindStringSubmatch(line); m != nil && !liveSandboxes[m[1]] {
				out = append(out, "mount of removed sandbox "+m[1][:12]+": "+line)
			}
		}
	}

	// cgroups and log dirs of pods this cluster had and removed.
	e.mu.Lock()
	gone := map[string]string{}
	for uid, name := range e.uids {
		if !live[uid] {
			gone[uid] = name
		}
	}
	e.mu.Unlock()
	for uid, name := range gone {
		for _, ctl := range []string{"memory", "cpu", "pids"} {
			for _, qos := range []string{"", "burstable", "besteffort"} {
				if d := filepath.Join("/sys/fs/cgroup", ctl, "kubepods", qos, "pod"+uid); exists(d) {
					out = append(out, "cgroup "+d+" of removed pod "+name)
				}
			}
		}
	}
	if ents, err := os.ReadDir(e.podLogsDir); err == nil {
		for _, d := range ents {
			parts := strings.Split(d.Name(), "_")
			if uid := parts[len(parts)-1]; !live[uid] {
				out = append(out, "pod log dir "+d.Name()+" of a removed pod")
			}
		}
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// assertNoLeaks waits (up to 2 minutes: the kubelet's GC and the proxy's resync are periodic) for the
// cluster to hold nothing for removed pods and Services, and fails t with what is left otherwise.
func (e *env) assertNoLeaks(t *testing.T) {
	t.Helper()
	start := time.Now()
	var last []string
	for time.Since(start) < 2*time.Minute {
		if last = e.leaks(t); len(last) == 0 {
			t.Logf("no leaks (sandboxes, netns, IPAM, iptables, mounts, cgroups, log dirs) after %.1fs", time.Since(start).Seconds())
			return
		}
		time.Sleep(time.Second)
	}
	e.dumpLogs(t)
	t.Errorf("left behind 2 minutes after the fault:\n%s", strings.Join(last, "\n"))
}
