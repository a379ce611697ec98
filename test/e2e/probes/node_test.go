// Package probes_test checks liveness, readiness and startup probes end to end: the node agent
// (agent.Run: the kubelet with the probe manager, kubelet/prober) on a private real containerd, talking
// to the real bundled API server (embedded etcd) with node credentials, running the demo image whose
// /healthz and /readyz the tests flip through CRI exec.
package probes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/kubelet"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

// node is one node agent with its containerd and API server.
type node struct {
	name   string
	rt     *containerd.Runtime
	api    *apiserver.Server
	client kubernetes.Interface // admin: the test's own reads and writes
}

func suffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startNode starts the API server, containerd and the node agent (agent.Run, as `nodekit agent` runs it)
// with the production probe manager (kubelet/prober) and shortened crash loop back-offs, and the
// endpointslice controller. Everything stops and is removed by t.Cleanup.
func startNode(t *testing.T) *node {
	t.Helper()
	n := &node{name: "probes-" + suffix()}
	cgroupRoot := fwagent.CgroupRoot(t, n.name) // removed last, after containerd removed the pods
	n.rt = containerd.Start(t, containerd.Options{})
	n.api = apiserver.Start(t, apiserver.Options{})
	n.client = n.api.Client
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := fwagent.Config(t, n.name, n.rt, n.api)
	cfg.Kubelet.CgroupRoot, cfg.Logger = cgroupRoot, log
	cfg.TuneKubelet = func(k *kubelet.Config) {
		k.HousekeepingPeriod, k.GCPeriod = time.Second, 5*time.Second
		k.CrashLoopBackOff, k.MaxCrashLoopBackOff = time.Second, 2*time.Second
	}
	// The endpointslice controller turns container readiness into endpoint readiness.
	runCtx, cancel := context.WithCancel(context.Background())
	ctrlDone := make(chan error, 1)
	go func() {
		ctrlDone <- controllers.Run(runCtx, n.client, controllers.Options{Controllers: []string{controllers.EndpointSlice}, Logger: log})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ctrlDone; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	fwagent.Start(t, cfg)
	return n
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// demoPod is the demo server with its HTTP port named "http" and its gRPC port "grpc".
func (n *node) demoPod(name string, args ...string) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			NodeName: n.name, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent, Args: args,
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "grpc", ContainerPort: 9090}},
			}},
		},
	}
}

func (n *node) create(t *testing.T, pod *v1.Pod) {
	t.Helper()
	if _, err := n.client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

// wait polls pod name every 100 ms until cond holds and returns it, failing after timeout.
func (n *node) wait(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *v1.Pod
	for time.Now().Before(deadline) {
		p, err := n.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if cond(p) {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("pod %s: no %s within %v; conditions=%+v containers=%+v", name, what, timeout, last.Status.Conditions, last.Status.ContainerStatuses)
	}
	t.Fatalf("pod %s: no %s within %v", name, what, timeout)
	return nil
}

// exec runs cmd in the pod's demo container and fails on a non-zero exit.
func (n *node) exec(t *testing.T, p *v1.Pod, cmd ...string) {
	t.Helper()
	cs := demo(p)
	if cs == nil || cs.ContainerID == "" {
		t.Fatalf("pod %s has no container to exec in", p.Name)
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	if _, stderr, code := n.rt.Exec(t, id, cmd...); code != 0 {
		t.Fatalf("exec %v: exit %d: %s", cmd, code, stderr)
	}
}

// events returns "<reason>: <message>" of the pod's events.
func (n *node) events(t *testing.T, name string) []string {
	t.Helper()
	list, err := n.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// waitEvent waits until the pod has an event starting with prefix.
func (n *node) waitEvent(t *testing.T, name, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs := n.events(t, name)
		for _, e := range evs {
			if strings.HasPrefix(e, prefix) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: no event %q within %v; events: %q", name, prefix, timeout, evs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func demo(p *v1.Pod) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == "demo" {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func condition(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, pc := range p.Status.Conditions {
		if pc.Type == c {
			return pc.Status
		}
	}
	return v1.ConditionUnknown
}

// isReady: the pod's Ready and ContainersReady conditions and the container's ready flag agree on want.
func isReady(want bool) func(*v1.Pod) bool {
	s := v1.ConditionFalse
	if want {
		s = v1.ConditionTrue
	}
	return func(p *v1.Pod) bool {
		cs := demo(p)
		return cs != nil && cs.Ready == want && condition(p, v1.PodReady) == s && condition(p, v1.ContainersReady) == s
	}
}

// endpointReady reads the ready condition of pod's endpoint in service's EndpointSlices; found is false
// while the pod has no endpoint there.
func (n *node) endpointReady(t *testing.T, service, pod string) (ready, found bool) {
	t.Helper()
	list, err := n.client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Name == pod {
				return ep.Conditions.Ready != nil && *ep.Conditions.Ready, true
			}
		}
	}
	return false, false
}

// waitEndpoint waits until pod's endpoint in service has ready == want.
func (n *node) waitEndpoint(t *testing.T, service, pod string, want bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ready, found := n.endpointReady(t, service, pod)
		if found && ready == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint of pod %s in service %s: ready=%v found=%v after %v, want ready=%v", pod, service, ready, found, timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func running(p *v1.Pod) bool {
	cs := demo(p)
	return cs != nil && cs.State.Running != nil
}
