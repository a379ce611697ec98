package kubelet

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGetPodDNS(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# host\nnameserver 192.0.2.53\nsearch corp.example\noptions timeout:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{cfg: Config{ClusterDNS: []net.IP{net.ParseIP("10.96.0.10")}, ClusterDomain: "cluster.local", ResolvConf: resolv},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pod := func(policy v1.DNSPolicy, hostNet bool) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet}}
	}
	cf, err := k.GetPodDNS(pod("", false))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cf.Servers, []string{"10.96.0.10"}) ||
		!reflect.DeepEqual(cf.Searches, []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}) ||
		!reflect.DeepEqual(cf.Options, []string{"ndots:5"}) {
		t.Errorf("ClusterFirst: %+v", cf)
	}
	def, _ := k.GetPodDNS(pod(v1.DNSClusterFirst, true))
	if !reflect.DeepEqual(def.Servers, []string{"192.0.2.53"}) || !reflect.DeepEqual(def.Options, []string{"timeout:2"}) {
		t.Errorf("ClusterFirst on the host network falls back to Default: %+v", def)
	}
	if hn, _ := k.GetPodDNS(pod(v1.DNSClusterFirstWithHostNet, true)); !reflect.DeepEqual(hn.Servers, []string{"10.96.0.10"}) {
		t.Errorf("ClusterFirstWithHostNet: %+v", hn)
	}
	two := "2"
	p := pod(v1.DNSNone, false)
	p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}
	none, _ := k.GetPodDNS(p)
	if !reflect.DeepEqual(none.Servers, []string{"1.1.1.1"}) || !reflect.DeepEqual(none.Options, []string{"ndots:2"}) {
		t.Errorf("None + dnsConfig: %+v", none)
	}
	p.Spec.DNSPolicy = v1.DNSClusterFirst
	merged, _ := k.GetPodDNS(p)
	if !reflect.DeepEqual(merged.Options, []string{"ndots:2"}) || len(merged.Servers) != 2 {
		t.Errorf("ClusterFirst + dnsConfig: options replaced by name, servers appended: %+v", merged)
	}
	k.cfg.ClusterDNS = nil
	if nodns, _ := k.GetPodDNS(pod("", false)); !reflect.DeepEqual(nodns.Servers, []string{"192.0.2.53"}) {
		t.Errorf("no cluster DNS configured: %+v", nodns)
	}
	if _, err := k.GetPodDNS(pod("Bogus", false)); err == nil {
		t.Errorf("unknown dnsPolicy accepted")
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("empty config accepted")
	}
	_, err := New(Config{NodeName: "n", RootDir: "relative", CgroupDriver: "bogus"})
	for _, want := range []string{"Runtime", "Images", "Client", "RootDir \"relative\"", "CgroupDriver \"bogus\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
