package up

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/examples"
	"github.com/nodekit/nodekit/runtime/cri"
)

// writeResolvConf writes the resolver file the test cluster's kubelet gives dnsPolicy Default pods
// (CoreDNS's upstream): the node bridge's address, where nothing serves DNS, so that CoreDNS forwards
// nothing off this host; the test resolves only in-cluster names.
func (e *env) writeResolvConf(t *testing.T) {
	t.Helper()
	_, pods, err := net.ParseCIDR(e.podCIDR)
	if err != nil {
		t.Fatal(err)
	}
	gw := slices.Clone(pods.IP.To4())
	gw[3] = 1 // the first node's podCIDR is the range's first /24; its bridge is .1
	e.resolvConf = filepath.Join(filepath.Dir(e.dataDir), "resolv.conf")
	if err := os.WriteFile(e.resolvConf, []byte("nameserver "+gw.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitCoreDNS waits for the coredns add-on's Deployment to have a Ready pod and for kube-dns to sit at
// the tenth address of the service range; it returns that address.
func (e *env) waitCoreDNS(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	want, err := addons.DNSServiceIP(e.serviceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.waitFor(t, client, 3*time.Minute, "the coredns Deployment Ready and kube-dns at "+want.String(), func() (bool, string) {
		svc, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, addons.DNSServiceName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if svc.Spec.ClusterIP != want.String() {
			return false, "kube-dns ClusterIP " + svc.Spec.ClusterIP
		}
		d, err := client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, addons.CoreDNSName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas >= 1, fmt.Sprintf("coredns %d/%d ready", d.Status.ReadyReplicas, d.Status.Replicas)
	})
	return want.String()
}

// assertClusterDNS checks the DNS specification against the running cluster: from a demo pod (CRI exec
// of the toolbox's nslookup and getent, through the pod's resolv.conf with its search domains),
// kubernetes.default and demo.default.svc.cluster.local resolve to their ClusterIPs, a headless
// Service's A records are its pods' IPs and its named port's SRV records answer; from the host, a query
// to the kube-dns ClusterIP answers for a Service and for a pod A record.
func (e *env) assertClusterDNS(t *testing.T, client kubernetes.Interface, rt *cri.Client, demoContainer string) {
	t.Helper()
	ctx := context.Background()
	dnsIP := e.waitCoreDNS(t, client)
	kube, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	demo, err := client.CoreV1().Services(examples.DemoNamespace).Get(ctx, examples.DemoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The demo pods' IPs, and a headless Service over them with a named port.
	pods, err := client.CoreV1().Pods(examples.DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: demoSelector})
	if err != nil {
		t.Fatal(err)
	}
	var podIPs []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			podIPs = append(podIPs, p.Status.PodIP)
		}
	}
	slices.Sort(podIPs)
	headless := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-headless", Namespace: examples.DemoNamespace},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app.kubernetes.io/name": examples.DemoName},
			Ports: []v1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}}}}
	if _, err := client.CoreV1().Services(examples.DemoNamespace).Create(ctx, headless, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// A short name, through the pod's search domains.
	out := e.execUntil(t, client, rt, demoContainer, []string{"nslookup", "kubernetes.default"}, func(out string) bool {
		return strings.Contains(out, "Address: "+kube.Spec.ClusterIP+"\n")
	})
	if !strings.Contains(out, "Server:\t\t"+dnsIP) || !strings.Contains(out, "Name:\tkubernetes.default.svc.cluster.local\n") {
		t.Errorf("nslookup kubernetes.default in a pod: want server %s and the name kubernetes.default.svc.cluster.local:\n%s", dnsIP, out)
	}
	e.execUntil(t, client, rt, demoContainer, []string{"getent", "hosts", "demo.default.svc.cluster.local"}, func(out string) bool {
		return strings.HasPrefix(out, demo.Spec.ClusterIP+" ")
	})
	// The headless Service: one A record per ready pod (the EndpointSlice controller needs a moment).
	e.execUntil(t, client, rt, demoContainer, []string{"getent", "hosts", "demo-headless"}, func(out string) bool {
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				got = append(got, f[0])
			}
		}
		slices.Sort(got)
		return slices.Equal(got, podIPs)
	})
	// SRV for the named port: one record per pod, port 8080, targets under the Service.
	e.execUntil(t, client, rt, demoContainer, []string{"nslookup", "-type=srv", "_http._tcp.demo-headless.default.svc.cluster.local"}, func(out string) bool {
		return strings.Count(out, " 8080 ") == len(podIPs) && strings.Count(out, ".demo-headless.default.svc.cluster.local.") == len(podIPs)
	})

	// From the host, to the ClusterIP (the proxy's rules route it to the CoreDNS pod).
	query := func(name string, qtype uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		c := &dns.Client{Timeout: 3 * time.Second}
		r, _, err := c.Exchange(m, net.JoinHostPort(dnsIP, "53"))
		return r, err
	}
	r, err := query("kubernetes.default.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatalf("DNS query from the host to %s: %v", dnsIP, err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != kube.Spec.ClusterIP || !r.Authoritative {
		t.Errorf("host query of kubernetes.default.svc.cluster.local: %v", r)
	}
	// A pod A record: a-b-c-d.<namespace>.pod.<domain>.
	podName := strings.ReplaceAll(podIPs[0], ".", "-") + ".default.pod.cluster.local."
	if r, err := query(podName, dns.TypeA); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != podIPs[0] {
		t.Errorf("host query of %s: %v %v", podName, r, err)
	}
	if r, err := query("nothere.default.svc.cluster.local.", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("host query of a missing Service: %v %v, want NXDOMAIN", r, err)
	}
	t.Logf("cluster DNS at %s answers in pods and from the host (kubernetes %s, demo %s, headless %v)", dnsIP, kube.Spec.ClusterIP, demo.Spec.ClusterIP, podIPs)
}

// execUntil runs cmd in the container (CRI ExecSync) until ok accepts its output (within a minute) and
// returns that output; on timeout it fails with the last output.
func (e *env) execUntil(t *testing.T, client kubernetes.Interface, rt *cri.Client, container string, cmd []string, ok func(string) bool) string {
	t.Helper()
	var out string
	e.waitFor(t, client, time.Minute, fmt.Sprintf("%q in a demo pod", cmd), func() (bool, string) {
		r, err := rt.Runtime().ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: container, Cmd: cmd, Timeout: 15})
		if err != nil {
			return false, err.Error()
		}
		out = string(r.Stdout)
		return r.ExitCode == 0 && ok(out), fmt.Sprintf("exit %d, stdout %q, stderr %q", r.ExitCode, out, r.Stderr)
	})
	return out
}

// waitCoreDNSRemoved waits until the coredns add-on's Deployment, Service and pods are gone (the server
// runs with --disable coredns).
func (e *env) waitCoreDNSRemoved(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	e.waitFor(t, client, 2*time.Minute, "the coredns add-on removed", func() (bool, string) {
		if _, err := client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, addons.CoreDNSName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Deployment coredns: %v", err)
		}
		if _, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, addons.DNSServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Service kube-dns: %v", err)
		}
		if _, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, addons.CoreDNSName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("ConfigMap coredns: %v", err)
		}
		l, err := client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: addons.DNSAppLabel + "=" + addons.DNSAppValue})
		if err != nil || len(l.Items) > 0 {
			return false, fmt.Sprintf("%d coredns pods (%v)", len(l.Items), err)
		}
		return true, ""
	})
}
