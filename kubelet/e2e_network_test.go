package kubelet_test

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// portmapConfList is the test framework's default bridge network plus the reference portmap plugin,
// so that the sandbox's port mappings (hostPort) take effect.
var portmapConfList = strings.Replace(containerd.DefaultConfList, `
  ]
}`, `,
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`, 1)

// TestHostPortAndHTTPHooks: a container port with a hostPort is reachable on the node (through the
// runtime's CNI portmap), a second pod claiming it is rejected (NodePorts), and httpGet postStart and
// preStop hooks are sent with their path, query (the conformance specs' hooks call netexec's
// /dial?host=...&port=...), headers and upstream's User-Agent (here to a server of the test on the
// node's loopback, named by the hook's host field).
func TestHostPortAndHTTPHooks(t *testing.T) {
	if !strings.Contains(portmapConfList, "portmap") {
		t.Fatal("could not add portmap to the framework's network config")
	}
	var mu sync.Mutex
	var hooks []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hooks = append(hooks, r.URL.RequestURI()+" "+r.Header.Get("X-Hook")+" "+r.UserAgent())
		mu.Unlock()
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)
	hook := func(path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Port: intstr.FromInt(portNum), Path: path,
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: path}}}}
	}

	cleanupPortmapChains(t)
	n := newNodeWith(t, false, containerd.Options{ConfList: []byte(portmapConfList)})
	hostPort := int32(20000 + rand.IntN(10000))
	pod := n.demoPod("hostport")
	c := &pod.Spec.Containers[0]
	c.Ports[0].HostPort = hostPort
	c.Lifecycle = &v1.Lifecycle{PostStart: hook("/post-start?msg=poststart&n=1"), PreStop: hook("/pre-stop?msg=prestop")}
	n.create(pod)
	p := n.waitPod("hostport", 60*time.Second, "Running", running)
	// The bridge's gateway address is a local address of the node: portmap DNATs it in OUTPUT.
	_, subnet, err := net.ParseCIDR(n.rt.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	gw := subnet.IP.To4()
	gw[3]++
	body := httpGet(t, "http://"+net.JoinHostPort(gw.String(), strconv.Itoa(int(hostPort)))+"/")
	if !strings.Contains(body, "pod=hostport") || !strings.Contains(body, "ip="+p.Status.PodIP) {
		t.Errorf("hostPort %d answered %q", hostPort, body)
	}
	// A second pod claiming the same host port (bound by spec.nodeName, past the scheduler's NodePorts
	// filter) is rejected by the node, as upstream's admission does: Failed, reason NodePorts, nothing
	// created (a StatefulSet then deletes and recreates it: "Should recreate evicted statefulset").
	clash := n.demoPod("hostport-clash")
	clash.Spec.Containers[0].Ports[0].HostPort = hostPort
	n.create(clash)
	cp := n.waitPod("hostport-clash", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if cp.Status.Reason != "NodePorts" || cp.Status.Message != "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("clashing pod: reason %q message %q, want NodePorts", cp.Status.Reason, cp.Status.Message)
	}
	if cs := n.podContainers(string(cp.UID)); len(cs) != 0 {
		t.Errorf("%d containers created for the rejected pod", len(cs))
	}
	n.deleteGracefully("hostport-clash", 0)
	n.waitGone("hostport-clash", 30*time.Second)
	n.deleteGracefully("hostport", 5)
	n.waitGone("hostport", 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	agent := "kube-lifecycle/" + strings.TrimPrefix(probes.UserAgent(), "kube-probe/")
	want := "/post-start?msg=poststart&n=1 /post-start?msg=poststart&n=1 " + agent + ",/pre-stop?msg=prestop /pre-stop?msg=prestop " + agent
	if got := strings.Join(hooks, ","); got != want {
		t.Errorf("hook requests %q, want %q: postStart then preStop with their queries and headers", got, want)
	}
}

// cleanupPortmapChains removes, after the test, the top-level nat chains the reference portmap plugin
// creates on first use and never deletes — only when they did not exist before the test and hold no
// port mapping any more (another user of portmap may have arrived meanwhile).
func cleanupPortmapChains(t *testing.T) {
	ipt, err := iptables.New()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := ipt.ChainExists("nat", "CNI-HOSTPORT-DNAT"); ok {
		return
	}
	t.Cleanup(func() {
		rules, err := ipt.List("nat", "CNI-HOSTPORT-DNAT")
		if err != nil || len(rules) > 1 { // the first entry is the chain's own -N line
			return
		}
		jumps := [][]string{
			{"PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
			{"OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
			{"POSTROUTING", "-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", "CNI-HOSTPORT-MASQ"},
		}
		for _, j := range jumps {
			if err := ipt.DeleteIfExists("nat", j[0], j[1:]...); err != nil {
				t.Errorf("remove portmap jump from %s: %v", j[0], err)
			}
		}
		for _, c := range []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"} {
			if err := ipt.ClearAndDeleteChain("nat", c); err != nil {
				t.Errorf("remove portmap chain %s: %v", c, err)
			}
		}
	})
}
