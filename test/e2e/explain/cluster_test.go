// Package explain_test breaks pods in many ways on one real cluster — embedded etcd and the API server,
// the bundled scheduler and EndpointSlice controller, a real kubelet with the probe manager and node
// status and the service proxy (the production agent, agent.Run; the proxy's rules go to a network
// namespace of the test's) on a private containerd whose network is nodekit-cni — and checks that `nodekit explain`
// names the step each is stuck at. A second Node object ("ghost") has no kubelet: it stays NotReady with the not-ready taint, the way
// a dead node looks, so the scheduler sees two nodes.
package explain_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/explain"
	"github.com/nodekit/nodekit/kubelet"
	"github.com/nodekit/nodekit/proxy"
	agentfw "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

// proxySyncPeriod is the node proxy's --min-sync-period and --sync-period.
const proxySyncPeriod = 4 * time.Second

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

// startCluster starts everything; t.Cleanup stops it in reverse order. The node is the production
// agent (agent.Run through test/framework/agent) with short back-offs, so crash loops and pull failures
// show within seconds.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	sfx := suffix()
	c := &cluster{node: "explain-" + sfx, ghost: "ghost-" + sfx}
	cgroupRoot := agentfw.CgroupRoot(t, "explain-"+sfx) // removal runs last, after containerd removed the pods
	// The node's network is nodekit-cni, the production plugin (its IPAM store is what CNIFailure fills).
	cniBin, err := cnitest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	c.rt = containerd.Start(t, containerd.Options{CNIBinDirs: []string{cniBin, "/usr/lib/cni"}, ConfList: containerd.NodekitConfList(t)})
	c.api = apiserver.Start(t, apiserver.Options{})
	c.client = c.api.Client
	c.explainer = &explain.Explainer{Client: c.client}
	log := logger(t)

	cfg := agentfw.Config(t, c.node, c.rt, c.api)
	cfg.Logger = log
	// The API server reaches the kubelet API (pods/log, the proxy status) on the node's InternalIP and
	// verifies its serving certificate against the cluster CA.
	cfg.NodeIP = "127.0.0.1"
	kp, err := apiserver.IssueKubeletServingCert(c.api.DataDir, c.node, net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	cfg.Kubelet.TLSCertFile, cfg.Kubelet.TLSPrivateKeyFile = filepath.Join(certDir, "kubelet.crt"), filepath.Join(certDir, "kubelet.key")
	if err := os.WriteFile(cfg.Kubelet.TLSCertFile, kp.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Kubelet.TLSPrivateKeyFile, kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// The node's proxy runs, writing its rules into a namespace of the test's own; it syncs every
	// proxySyncPeriod and never sooner, so a change stays unprogrammed for a while after a sync.
	proxyNS, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxyNS.Close(); _ = testutils.UnmountNS(proxyNS) })
	cfg.DisableProxy, cfg.ProxyMetricsAddr, cfg.ProxyHealthzAddr = false, "", ""
	cfg.TuneProxy = func(pc *proxy.Config) {
		pc.NetNS, pc.MinSyncPeriod, pc.SyncPeriod = proxyNS, proxySyncPeriod, proxySyncPeriod
	}
	cfg.Kubelet.CgroupRoot = cgroupRoot
	cfg.Kubelet.NodeStatusUpdateFrequency = metav1.Duration{Duration: time.Second}
	cfg.TuneKubelet = func(k *kubelet.Config) {
		k.HousekeepingPeriod, k.GCPeriod = time.Second, 5*time.Second
		k.CrashLoopBackOff, k.MaxCrashLoopBackOff = time.Second, 2*time.Second
		k.ImagePullBackOff, k.MaxImagePullBackOff = time.Second, 2*time.Second
	}
	agentfw.Start(t, cfg)
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
	run("scheduler", func() error {
		return scheduler.Run(ctx, c.client, scheduler.Options{Logger: log, RetryInterval: 2 * time.Second})
	})
	run("controllers", func() error {
		return controllers.Run(ctx, c.client, controllers.Options{Controllers: []string{controllers.EndpointSlice}, Logger: log})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
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
