package up

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/examples"
	"github.com/nodekit/nodekit/kubelet/processpods"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestLab runs `nodekit lab up --nodes 3` and asserts the pod creation workflow across nodes: pods pinned
// to two nodes talk pod-to-pod across the lab bridge (through the host-gw routes the agents installed), the demo Service answers from a third node's
// namespace with every backend, a frozen node (its agent SIGSTOPped: no more heartbeats) turns NotReady
// and its demo pods are replaced on the other nodes, thawed it is Ready again and removes the pods
// evicted meanwhile; `lab down` leaves no namespace, interface, process or data behind.
func TestLab(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nodekit lab needs root (netns, bridge, containerd)")
	}
	l := startLab(t, "nkt", 3, 0)
	dataDir, nodekit := l.dataDir, l.nodekit
	var frozen int
	l.beforeDown = append(l.beforeDown, func() {
		if frozen != 0 {
			_ = syscall.Kill(frozen, syscall.SIGCONT)
		}
	})
	st, err := cluster.ReadLabState(dataDir)
	if err != nil || len(st.Nodes) != 3 {
		t.Fatalf("lab state: %v %+v", err, st)
	}
	e := &env{dataDir: filepath.Join(dataDir, "server")}
	client := e.client(t)
	ctx := context.Background()
	n1, n2, n3 := st.Nodes[0], st.Nodes[1], st.Nodes[2]

	// Pod-to-pod across nodes: a pod pinned to n1 reaches a pod pinned to n2 by its pod IP.
	ips := e.runPinned(t, client, map[string]string{"pin-a": n1.Name, "pin-b": n2.Name})
	pidA := podPID(t, n1, "pin-a")
	var answer string
	for i := 0; i < 20; i++ {
		b, err := exec.Command("nsenter", "-t", strconv.Itoa(pidA), "-n", "--", "curl", "-sS", "--max-time", "3", "http://"+ips["pin-b"]+":8080/").CombinedOutput()
		if answer = strings.TrimSpace(string(b)); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(answer, "pod=pin-b ") {
		t.Fatalf("pod pin-a on %s → pod pin-b %s on %s: %q", n1.Name, ips["pin-b"], n2.Name, answer)
	}
	t.Logf("pod on %s reached pod on %s: %s", n1.Name, n2.Name, answer)
	// ... through the route n1's agent installed (podroutes: cni/routes' protocol), as the host's.
	node2, err := client.CoreV1().Nodes().Get(ctx, n2.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := node2.Spec.PodCIDR + " via " + n2.IP
	for _, where := range [][]string{{"-n", n1.Netns}, nil} {
		out, err := exec.Command("ip", append(where, "route", "show", "proto", strconv.Itoa(int(routes.Protocol)))...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("ip %v route show proto %d: %v %q, want %q", where, routes.Protocol, err, out, want)
		}
	}

	// A Service across nodes: the demo, reached from n3's namespace, answers from every backend.
	if _, err := cluster.Apply(ctx, restConfig(t, e), examples.Demo); err != nil {
		t.Fatal(err)
	}
	pods := e.waitDemoReady(t, client, 3, nil)
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	svc, err := client.CoreV1().Services("default").Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := cluster.ServiceURL(svc)
	e.assertAllBackends(t, "node "+n3.Name, url, names, func() (string, error) {
		b, err := exec.Command(nodekit, "lab", "--data-dir", dataDir, "exec", n3.Name, "--", "curl", "-sS", "--max-time", "3", url).CombinedOutput()
		return strings.TrimSpace(string(b)), err
	})

	// Node loss: freeze the agent of a node running demo pods; the node turns NotReady (Unknown) and the
	// Deployment is back to 3 Ready pods, none on that node.
	byNode := map[string]int{}
	for _, p := range pods {
		byNode[p.Spec.NodeName]++
	}
	var lost cluster.LabNode
	for _, n := range st.Nodes {
		if byNode[n.Name] > 0 {
			lost = n
			break
		}
	}
	pidFile := cluster.LayoutOf(dataDir).PIDFile(lost.Name + "-agent")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	frozen, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	t.Logf("freezing %s (agent pid %d, %d demo pods)", lost.Name, frozen, byNode[lost.Name])
	if err := syscall.Kill(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, 2*time.Minute, lost.Name+" NotReady", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, lost.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status != v1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})
	e.waitFor(t, client, 3*time.Minute, "3 Ready demo pods off the lost node", func() (bool, string) {
		return readyOff(ctx, client, lost.Name)
	})
	// Thawed, the node comes back Ready and its kubelet finishes the pods evicted meanwhile.
	_ = syscall.Kill(frozen, syscall.SIGCONT)
	frozen = 0
	e.waitFor(t, client, 2*time.Minute, lost.Name+" Ready again with its evicted pods gone", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, lost.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + lost.Name})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, p := range pods.Items {
			if p.Annotations[static.ConfigSourceAnnotation] != processpods.Source { // not its kube-proxy's pod (a process)
				left++
			}
		}
		return nodeReady(n) && left == 0, fmt.Sprintf("Ready=%v, %d pods left", nodeReady(n), left)
	})

	// lab down: nothing left.
	l.downAndAssertGone(st)
	if save, err := exec.Command("iptables-save").Output(); err == nil && strings.Contains(string(save), svc.Spec.ClusterIP+"/32") {
		t.Errorf("iptables still routes the lab's ClusterIP %s", svc.Spec.ClusterIP)
	}
}

func readyOff(ctx context.Context, client kubernetes.Interface, lost string) (bool, string) {
	l, err := client.CoreV1().Pods(examples.DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: demoSelector})
	if err != nil {
		return false, err.Error()
	}
	ready := 0
	var where []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != lost && podReady(&p) {
			ready++
			where = append(where, p.Name+"@"+p.Spec.NodeName)
		}
	}
	return ready >= 3, fmt.Sprintf("%d Ready off %s: %v", ready, lost, where)
}

// runPinned starts a demo-server pod named name on node for each name → node of pods and returns their
// pod IPs once all are Running.
func (e *env) runPinned(t *testing.T, client kubernetes.Interface, pods map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	for name, node := range pods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []v1.Container{{Name: "demo-server", Image: "nodekit.local/demo-server:v1",
				Env: []v1.EnvVar{{Name: "POD_NAME", Value: name}}}}}}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	e.waitFor(t, client, 3*time.Minute, "pinned pods Running", func() (bool, string) {
		for name := range pods {
			p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning || p.Status.PodIP == "" {
				return false, fmt.Sprintf("%s: %v %v", name, err, p.Status.Phase)
			}
			ips[name] = p.Status.PodIP
		}
		return true, ""
	})
	return ips
}

// podPID is the PID of the first container of the pod named pod on lab node n (found through n's
// containerd), whose network namespace is the pod's.
func podPID(t *testing.T, n cluster.LabNode, pod string) int {
	t.Helper()
	ctx := context.Background()
	rt, err := cri.Dial(ctx, "unix://"+agent.Config{DataDir: n.DataDir}.Paths().ContainerdSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cs, err := rt.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": pod}}})
	if err != nil || len(cs.Containers) == 0 {
		t.Fatalf("%s's container on %s: %v", pod, n.Name, err)
	}
	return containerPID(t, rt, cs.Containers[0].Id)
}
