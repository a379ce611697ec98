// Package explain_test breaks pods in many ways on one real cluster — embedded etcd and the API server,
// the bundled scheduler and EndpointSlice controller, a real kubelet with the probe manager and node
// status on a private containerd — and checks that `nodekit explain` names the step each is stuck at.
// A second Node object ("ghost") has no kubelet: it stays NotReady with the not-ready taint, the way
// a dead node looks, so the scheduler sees two nodes.
package explain_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/explain"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/kubelet/nodestatus"
	"github.com/nodekit/nodekit/kubelet/prober"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

// cluster is the control plane, one real node and one ghost node.
type cluster struct {
	api         *apiserver.Server
	rt          *containerd.Runtime
	client      kubernetes.Interface
	node, ghost string
	explainer   *explain.Explainer
}

func suffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startCluster starts everything; t.Cleanup stops it in reverse order.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	sfx := suffix()
	c := &cluster{node: "explain-" + sfx, ghost: "ghost-" + sfx}
	cgroupRoot := "/nodekit-explain-" + sfx
	t.Cleanup(func() { removeCgroups(t, cgroupRoot) }) // runs last, after containerd removed the pods
	c.rt = containerd.Start(t, containerd.Options{})
	c.api = apiserver.Start(t, apiserver.Options{})
	c.client = c.api.Client
	c.explainer = &explain.Explainer{Client: c.client}
	log := logger(t)
	nodeClient := c.api.NodeClient(t, c.node)

	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: nodeClient.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: c.node})
	probes := prober.New(prober.Options{Runtime: c.rt.CRI.Runtime(), Recorder: recorder, Logger: log})
	machine, err := nodestatus.ReadMachine(c.rt.Dir)
	if err != nil {
		t.Fatal(err)
	}
	nodeIP := net.IPv4(127, 0, 0, 1)
	status, err := nodestatus.New(nodestatus.Config{NodeName: c.node, Client: nodeClient, Runtime: c.rt.CRI.Runtime(), Images: c.rt.CRI.Image(),
		NodeIP: nodeIP, Machine: machine, UpdateFrequency: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kl, err := kubelet.New(kubelet.Config{
		NodeName: c.node, NodeIPs: []net.IP{nodeIP}, Runtime: c.rt.CRI.Runtime(), Images: c.rt.CRI.Image(), Client: nodeClient,
		Recorder: recorder, ProbeManager: probes,
		RootDir: filepath.Join(dir, "kubelet"), PodLogsDir: filepath.Join(dir, "logs"), CgroupRoot: cgroupRoot,
		HousekeepingPeriod: time.Second, GCPeriod: 5 * time.Second,
		CrashLoopBackOff: time.Second, MaxCrashLoopBackOff: 2 * time.Second,
		ImagePullBackOff: time.Second, MaxImagePullBackOff: 2 * time.Second,
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.addGhost(t)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	run("node status", func() error { return status.Run(ctx) })
	run("kubelet", func() error { return kl.Run(ctx) })
	run("scheduler", func() error {
		return scheduler.Run(ctx, c.client, scheduler.Options{Logger: log, RetryInterval: 2 * time.Second})
	})
	run("controllers", func() error {
		return controllers.Run(ctx, c.client, controllers.Options{Controllers: []string{controllers.EndpointSlice}, Logger: log})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		probes.Close()
		events.Shutdown()
	})
	return c
}

// addGhost registers a Node no kubelet serves: Ready=False and tainted not-ready, as after a crash.
func (c *cluster) addGhost(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	n, err := c.client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.ghost},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "container runtime network not ready: cni config uninitialized", LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// removeCgroups removes the kubelet's cgroup root from every v1 hierarchy, children first.
func removeCgroups(t *testing.T, root string) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		var dirs []string
		filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("remove cgroup: %v", err)
			}
		}
	}
}
