// Package agent starts nodekit's node agent (agent.Run, what `nodekit agent` runs) for e2e tests, on a
// test containerd (test/framework/containerd) and a test API server (test/framework/apiserver), with
// everything private to the test: data dir, CNI config dir, pod log dir, cgroup root, kubelet server
// port. The service proxy is off (the tests that need one run it themselves).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// NodeIP is the InternalIP Config gives the node (TEST-NET-1: nothing is reached through it).
const NodeIP = "192.0.2.10"

// Config returns the agent of Node name on rt with api's node credentials for name: its own data dir
// (t.TempDir()) holding the kubelet root dir, the CNI config dir (net.d) and the pod logs (pods),
// InternalIP NodeIP, the kubelet server on a free port of 127.0.0.1, the proxy and the route controller off, image GC off and
// only the memory.available<100Mi eviction threshold. The pods' cgroup root is the caller's (see
// CgroupRoot).
func Config(t testing.TB, name string, rt *containerd.Runtime, api *apiserver.Server) agent.Config {
	t.Helper()
	port, err := apiserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := agent.Default()
	c.DataDir, c.Kubeconfig, c.NodeName, c.NodeIP = t.TempDir(), api.NodeKubeconfig(t, name), name, NodeIP
	dataDir := c.DataDir
	t.Cleanup(func() { UnmountBelow(t, dataDir) }) // runs before t.TempDir's removal
	c.CNIConfDir, c.DisableProxy = filepath.Join(c.DataDir, "net.d"), true
	c.NetworkBackend = podroutes.BackendNone // the host's routes are no test node's to keep
	c.ComponentPods = false                  // no server on this data dir, and no proxy
	k := &c.Kubelet
	k.ContainerRuntimeEndpoint, k.PodLogsDir = rt.Endpoint(), filepath.Join(c.DataDir, "pods")
	k.Address, k.Port = "127.0.0.1", int32(port)
	noGC := NoImageGCPercent
	k.ImageGCHighThresholdPercent = &noGC
	k.EvictionHard = map[string]string{"memory.available": MemoryEvictionHard}
	return c
}

// UnmountBelow lazily unmounts every mount below dir, deepest first: the pods' tmpfs volumes (the
// kube-api-access token volume every pod gets, secrets, projected volumes) of pods a test left running,
// which would keep t.TempDir from being removed. Containers still running keep their own copies.
func UnmountBelow(t testing.TB, dir string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Errorf("mounts below %s: %v", dir, err)
		return
	}
	slices.SortFunc(mounts, func(a, b *mountinfo.Info) int { return len(b.Mountpoint) - len(a.Mountpoint) })
	for _, m := range mounts {
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("unmount %s: %v", m.Mountpoint, err)
		}
	}
}

// The kubelet settings every harness node runs with. The host's disks are shared with other work and
// their fill level is no test's business: with upstream's defaults (image GC at 85 % use, evictionHard
// imagefs.available<15 %) a full CI disk would remove images and evict pods, and the disk-pressure taint
// would keep every pod off the node, under every test. The tests of image GC and eviction set their own
// thresholds.
const (
	// NoImageGCPercent is imageGCHighThresholdPercent: GC never starts.
	NoImageGCPercent = int32(100)
	// MemoryEvictionHard is the only evictionHard threshold: memory.available<100Mi.
	MemoryEvictionHard = "100Mi"
)

// WriteKubeletConfig writes a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) holding the
// harness settings above into dir and returns its path, for harnesses that start `nodekit up`
// (its --kubelet-config). Errors are the file's write error.
func WriteKubeletConfig(dir string) (string, error) {
	path := filepath.Join(dir, "kubelet-config.yaml")
	body := fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"imageGCHighThresholdPercent: %d\nevictionHard:\n  memory.available: %s\n", NoImageGCPercent, MemoryEvictionHard)
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// CgroupRoot returns /nodekit-<name>, the pods' cgroup root of a test node, and registers its removal
// from every cgroup v1 hierarchy and the v2 tree with t.Cleanup. Call it before starting the test's containerd, so the
// removal runs after containerd removed the pods.
func CgroupRoot(t testing.TB, name string) string {
	root := "/nodekit-" + name
	t.Cleanup(func() {
		hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*") // cgroup v1: one per controller
		hierarchies = append(hierarchies, "/sys/fs/cgroup") // cgroup v2: the unified tree
		for _, h := range hierarchies {
			var dirs []string
			_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.Reverse(dirs) // children first
			for _, d := range dirs {
				if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("remove cgroup %s: %v", d, err)
				}
			}
		}
	})
	return root
}

// Agent is an agent.Run in this process.
type Agent struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	kl     chan *kubelet.Kubelet
}

// Start runs agent.Run(cfg) until Stop (registered with t.Cleanup) and returns once the kubelet is
// built; it fails t if the agent exits before, or takes over 30 s. cfg.OnKubelet, if set, still runs.
func Start(t testing.TB, cfg agent.Config) *Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{t: t, cancel: cancel, done: make(chan error, 1), kl: make(chan *kubelet.Kubelet, 1)}
	onKubelet := cfg.OnKubelet
	cfg.OnKubelet = func(kl *kubelet.Kubelet) {
		if onKubelet != nil {
			onKubelet(kl)
		}
		a.kl <- kl
	}
	go func() { a.done <- agent.Run(ctx, cfg) }()
	t.Cleanup(a.Stop)
	select {
	case kl := <-a.kl:
		a.kl <- kl
	case err := <-a.done:
		a.done <- err
		t.Fatalf("agent %s exited before its kubelet started: %v", cfg.NodeName, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("agent %s: no kubelet within 30s", cfg.NodeName)
	}
	return a
}

// Kubelet is the agent's in-process kubelet.
func (a *Agent) Kubelet() *kubelet.Kubelet {
	kl := <-a.kl
	a.kl <- kl
	return kl
}

// Stop stops the agent (pods keep running in containerd, as when a node agent restarts) and fails t if
// Run returned an error or did not return within 30 s. Idempotent.
func (a *Agent) Stop() {
	a.once.Do(func() {
		a.cancel()
		select {
		case err := <-a.done:
			if err != nil {
				a.t.Errorf("agent Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			a.t.Errorf("agent did not stop within 30s")
		}
	})
}
