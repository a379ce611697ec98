package apiserver_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// kubectl runs the real kubectl (skipping the test when it is not installed) with the server's admin
// kubeconfig and returns its output; a failing command fails the test.
func kubectl(t *testing.T, s *fw.Server, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := kubectlAt(path, t.TempDir(), s, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kubectlErr runs kubectl like kubectl, returning its output and error instead of failing the test.
func kubectlErr(t *testing.T, s *fw.Server, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	return kubectlAt(path, t.TempDir(), s, args...)
}

func kubectlAt(path, home string, s *fw.Server, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", s.KubeconfigPath}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestKubernetesEndpointSlice: after start the EndpointSlice default/kubernetes points at the advertised
// address and secure port (what the proxy routes the `kubernetes` ClusterIP from), labelled for the
// Service and not managed by the EndpointSlice controller; a slice changed behind the server's back is
// repaired at the next start.
func TestKubernetesEndpointSlice(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	slices := s.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	check := func() {
		t.Helper()
		var sl *discoveryv1.EndpointSlice
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx2 context.Context) (bool, error) {
			got, err := slices.Get(ctx2, "kubernetes", metav1.GetOptions{})
			if err != nil || len(got.Endpoints) != 1 || len(got.Endpoints[0].Addresses) != 1 || got.Endpoints[0].Addresses[0] != host {
				return false, nil
			}
			sl = got
			return true, nil
		})
		if err != nil {
			got, gerr := slices.Get(ctx, "kubernetes", metav1.GetOptions{})
			t.Fatalf("slice kubernetes never pointed at %s: %+v %v", host, got, gerr)
		}
		if sl.Labels[discoveryv1.LabelServiceName] != "kubernetes" || sl.Labels[discoveryv1.LabelManagedBy] != "" || sl.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Fatalf("slice meta %v, addressType %s", sl.Labels, sl.AddressType)
		}
		if c := sl.Endpoints[0].Conditions; c.Ready == nil || !*c.Ready {
			t.Fatalf("endpoint not ready: %+v", c)
		}
		if len(sl.Ports) != 1 || sl.Ports[0].Name == nil || *sl.Ports[0].Name != "https" || sl.Ports[0].Port == nil ||
			int(*sl.Ports[0].Port) != port || sl.Ports[0].Protocol == nil || *sl.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Fatalf("slice ports %+v, want https %d/TCP", sl.Ports, port)
		}
	}
	check()
	ep, err := s.Client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || ep.Labels[discoveryv1.LabelSkipMirror] != "true" {
		t.Fatalf("endpoints kubernetes: %+v %v", ep, err)
	}

	sl, err := slices.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{"10.250.0.9"}
	if _, err := slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	check()
	if out := kubectl(t, s, "get", "endpointslices", "kubernetes"); !regexp.MustCompile(`(?m)^kubernetes\s+IPv4\s+` + strconv.Itoa(port) + `\s+` + regexp.QuoteMeta(host) + `\s+\S+\s*$`).MatchString(out) {
		t.Fatalf("kubectl get endpointslices:\n%s", out)
	}
}

// TestKubectlTables: the real kubectl prints upstream's columns: `get pods -o wide` shows the pod IP and
// node; `get nodes` shows NotReady for a node whose Ready condition is Unknown, with its roles, and
// `-o wide` its internal IP and runtime.
func TestKubectlTables(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.7.10"}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.32.0", ContainerRuntimeVersion: "containerd://1.6.20"},
		},
	}
	nc := s.NodeClient(t, "node-1")
	// the admin registers it: NodeRestriction refuses a node-role label from the node itself
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod("web-0", "node-1"), metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	eventually(t, "node-1 gets its pod", func() (err error) {
		p, err = nc.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		return err
	})
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, "10.244.0.17", []corev1.PodIP{{IP: "10.244.0.17"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "nginx:1.25", Ready: true, RestartCount: 1,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if _, err := nc.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := kubectl(t, s, "get", "pods", "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^web-0\s+1/1\s+Running\s+1\s+\S+\s+10\.244\.0\.17\s+node-1\s+<none>\s+<none>$`).MatchString(out) {
		t.Fatalf("kubectl get pods -o wide:\n%s", out)
	}
	out = kubectl(t, s, "get", "pods")
	if !regexp.MustCompile(`(?m)^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$`).MatchString(out) || strings.Contains(out, "10.244.0.17") {
		t.Fatalf("kubectl get pods (not wide) header or IP:\n%s", out)
	}
	out = kubectl(t, s, "get", "nodes")
	if !regexp.MustCompile(`(?m)^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^node-1\s+NotReady\s+control-plane\s+\S+\s+v1\.32\.0$`).MatchString(out) {
		t.Fatalf("kubectl get nodes:\n%s", out)
	}
	out = kubectl(t, s, "get", "nodes", "-o", "wide")
	if !regexp.MustCompile(`(?m)^node-1\s+NotReady\s+control-plane\s+\S+\s+v1\.32\.0\s+192\.168\.7\.10\s+<none>\s+<unknown>\s+<unknown>\s+containerd://1\.6\.20$`).MatchString(out) {
		t.Fatalf("kubectl get nodes -o wide:\n%s", out)
	}
}
