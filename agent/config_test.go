package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/proxy"
)

// parse runs args (Args' output) through BindFlags on a Default() config, as `nodekit agent` does.
func parse(t *testing.T, args []string) Config {
	t.Helper()
	if len(args) == 0 || args[0] != Command {
		t.Fatalf("args %q do not start with %q", args, Command)
	}
	cfg := Default()
	fs := pflag.NewFlagSet(Command, pflag.ContinueOnError)
	f := BindFlags(fs, &cfg)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	got, err := f.Config()
	if err != nil {
		t.Fatalf("Config after %q: %v", args, err)
	}
	return got
}

func TestDefaultArgsNameOnlyTheDataDir(t *testing.T) {
	if got, want := Default().Args(), []string{Command, "--data-dir", DefaultDataDir}; !slices.Equal(got, want) {
		t.Errorf("Default().Args() = %q, want %q", got, want)
	}
	if got := parse(t, []string{Command}); !equality.Semantic.DeepEqual(got, Default()) {
		t.Errorf("no flags parse to %+v, want Default() %+v", got, Default())
	}
}

func TestArgsRoundTrip(t *testing.T) {
	full := Default()
	full.DataDir, full.Server, full.Kubeconfig = "/srv/nk", "https://10.0.0.1:6443", "/srv/nk/agent/kubelet.kubeconfig"
	full.NodeName, full.NodeIP = "n1", "10.0.0.11"
	full.NodeLabels = map[string]string{"zone": "a", "node.kubernetes.io/pool": "workers"}
	full.RootDir, full.CNIBinDir, full.CNIConfDir = "/srv/kubelet", "/srv/cni/bin", "/srv/net.d"
	full.ClusterCIDR, full.ImagesDir = "10.42.0.0/16", "/srv/images"
	full.Token, full.CAHash = "abcdef.0123456789abcdef", "sha256:00ff"
	full.DisableProxy, full.ProxyMode, full.ProxyMetricsAddr = true, proxy.ModeIPVS, ""
	full.GoMemoryLimit = "64Mi"
	full.NetworkBackend, full.VXLANVNI, full.VXLANPort = "vxlan", 4, 4789
	k := &full.Kubelet
	noProfiling := false
	k.EnableProfilingHandler = &noProfiling
	k.Address, k.Port, k.PodLogsDir, k.MaxPods = "10.0.0.11", 11250, "/srv/pods", 50
	k.ClusterDNS, k.ClusterDomain = []string{"10.96.0.10", "10.96.0.11"}, "cluster.local"
	k.SyncFrequency = metav1.Duration{Duration: 30 * time.Second}
	k.NodeStatusUpdateFrequency = metav1.Duration{Duration: 2 * time.Second}
	k.RegisterWithTaints = []v1.Taint{{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}}
	k.CgroupRoot, k.CgroupDriver, k.StaticPodPath = "/nodekit", "systemd", "/etc/nodekit/manifests"
	k.ContainerRuntimeEndpoint, k.ImageServiceEndpoint = "unix:///run/containerd/containerd.sock", "unix:///run/img.sock"
	k.TLSCertFile, k.TLSPrivateKeyFile, k.Authentication.X509.ClientCAFile = "/srv/tls.crt", "/srv/tls.key", "/srv/ca.crt"

	up := Default() // what cluster/ sets for `nodekit up`
	up.DataDir, up.Kubeconfig, up.NodeName, up.ImagesDir = "/var/lib/nodekit", "/var/lib/nodekit/agent/kubelet.kubeconfig", "host", "/var/lib/nodekit/images"

	for name, c := range map[string]Config{"every flag": full, "up": up} {
		args := c.Args()
		got := parse(t, args)
		if !equality.Semantic.DeepEqual(got, c) {
			t.Errorf("%s: %q parse to\n%+v\nwant\n%+v", name, args, got, c)
		}
	}
	// Flags in name order, a bool as --name=value, the others as --name value.
	got := full.Args()
	if !slices.Equal(got[:3], []string{Command, "--data-dir", "/srv/nk"}) || !slices.Contains(got, "--disable-proxy=true") ||
		!slices.IsSorted(slices.DeleteFunc(slices.Clone(got[3:]), func(a string) bool { return !strings.HasPrefix(a, "--") })) {
		t.Errorf("Args() = %q", got)
	}
	// Only the settings that differ from the defaults are spelled out.
	if got := up.FlagArgs(); slices.Contains(got, "--"+FlagDataDir) || slices.Contains(got, "--port") {
		t.Errorf("up's Args() = %q spell out defaults", got)
	}
}

// With a KubeletConfiguration file the fields without a flag come from it, and every kubelet flag is
// given so that the flags' values win over the file's, even where they equal the defaults.
func TestArgsRoundTripWithKubeletConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"port: 11250\nnodeLeaseDurationSeconds: 4\nfileCheckFrequency: 1s\nmaxPods: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := parse(t, []string{Command, "--config", file, "--port", "10250", "--node-name", "n1"})
	if c.Kubelet.Port != 10250 || c.Kubelet.NodeLeaseDurationSeconds != 4 || c.Kubelet.MaxPods != 50 || c.KubeletConfigFile != file {
		t.Fatalf("resolved %+v", c.Kubelet)
	}
	args := c.Args()
	if got := parse(t, args); !equality.Semantic.DeepEqual(got, c) {
		t.Errorf("%q parse to\n%+v\nwant\n%+v", args, got.Kubelet, c.Kubelet)
	}
	if !slices.Contains(args, "--port") || !slices.Contains(args, "--config") {
		t.Errorf("Args() = %q: want --config and --port (the default, over the file's 11250)", args)
	}
}

func TestBindFlagsErrorsNameTheFlag(t *testing.T) {
	cfg := Default()
	fs := pflag.NewFlagSet(Command, pflag.ContinueOnError)
	BindFlags(fs, &cfg)
	if err := fs.Parse([]string{"--node-labels", "zone"}); err == nil || !strings.Contains(err.Error(), "--node-labels") || !strings.Contains(err.Error(), `"zone"`) {
		t.Errorf("bad --node-labels: %v", err)
	}
}

func TestPaths(t *testing.T) {
	c := Default()
	c.DataDir = "/d"
	want := Paths{DataDir: "/d", Containerd: "/d/containerd", ContainerdLog: "/d/containerd/containerd.log",
		ContainerdSocket: "/d/containerd/containerd.sock", Images: "/d/images",
		CNI: "/d/cni", CNIBin: "/d/cni/bin", CNICache: "/d/cni/cache", Conflist: "/etc/cni/net.d/10-nodekit.conflist", KubeletRoot: "/d/kubelet", KubeletPKI: "/d/kubelet/pki",
		Storage: "/d/storage", Components: "/d/components", ProxyLog: "/d/logs/kube-proxy.log"}
	if got := c.Paths(); got != want {
		t.Errorf("Paths() = %+v\nwant %+v", got, want)
	}
	c.RootDir, c.CNIBinDir, c.ImagesDir, c.CNIConfDir = "/k", "/b", "/i", "/n"
	want.KubeletRoot, want.KubeletPKI, want.CNIBin, want.Images, want.Conflist = "/k", "/k/pki", "/b", "/i", "/n/10-nodekit.conflist"
	if got := c.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("Paths() with explicit dirs = %+v\nwant %+v", got, want)
	}
}

func TestRunRejectsBadSettings(t *testing.T) {
	t.Setenv("NODEKIT_TOKEN", "")
	t.Setenv("NODEKIT_CA_HASH", "")
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.NodeIP = "10.0.0" }, `--node-ip: "10.0.0" is not an IP address`},
		{func(c *Config) { c.ClusterCIDR = "10.244.0.0" }, "--cluster-cidr"},
		{func(c *Config) { c.Kubelet.Port = 0 }, "kubelet config: port: 0 is not in 1-65535"},
		{func(c *Config) { c.Token = "abcdef.0123456789abcdef" }, "--ca-hash: required with --token"},
		{func(c *Config) { c.ProxyMode = "userspace" }, `--proxy-mode: "userspace" is not one of [iptables ipvs nftables]`},
		{func(c *Config) { c.NetworkBackend = "geneve" }, `--network-backend: "geneve" is not one of [host-gw vxlan none]`},
		{func(c *Config) { c.NetworkBackend, c.VXLANVNI = "vxlan", 1<<24 }, `--vxlan-vni: vxlan: VNI 16777216: want 1..16777215`},
		{func(c *Config) { c.NetworkBackend, c.VXLANPort = "vxlan", 70000 }, `--vxlan-port: vxlan: port 70000: want 1..65535`},
		{func(c *Config) { c.GoMemoryLimit = "lots" }, `--go-memory-limit: "lots" is not a quantity`},
		{func(c *Config) { c.GoMemoryLimit = "-1Mi" }, `--go-memory-limit: "-1Mi" is negative`},
	} {
		c := Default()
		c.DataDir, c.NodeName, c.NodeIP = t.TempDir(), "n1", "10.0.0.1"
		tc.mod(&c)
		if err := Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run error = %v, want it to contain %q", err, tc.want)
		}
		if e, _ := os.ReadDir(c.DataDir); len(e) > 0 && tc.want != "--ca-hash: required with --token" {
			t.Errorf("Run with bad settings (%s) wrote %d entries into the data dir before failing", tc.want, len(e))
		}
	}
}
