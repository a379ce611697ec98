package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

const sample = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 11250
staticPodPath: /etc/nodekit/manifests
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
nodeStatusUpdateFrequency: 2s
nodeLeaseDurationSeconds: 8
maxPods: 50
runtimeRequestTimeout: 3m
registerWithTaints:
- key: dedicated
  value: infra
  effect: NoSchedule
authentication:
  x509:
    clientCAFile: /etc/ca.crt
evictionHard:
  memory.available: 200Mi
containerLogMaxSize: 1Mi
imageMaximumGCAge: 1h
allowedUnsafeSysctls: ["kernel.msg*"]
`

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecode(t *testing.T) {
	cfg, ignored, err := Decode([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "127.0.0.1" || cfg.Port != 11250 || cfg.MaxPods != 50 || cfg.NodeLeaseDurationSeconds != 8 ||
		cfg.NodeStatusUpdateFrequency.Duration != 2*time.Second || cfg.ClusterDomain != "cluster.local" ||
		!reflect.DeepEqual(cfg.ClusterDNS, []string{"10.96.0.10"}) || cfg.Authentication.X509.ClientCAFile != "/etc/ca.crt" ||
		cfg.RuntimeRequestTimeout.Duration != 3*time.Minute || !reflect.DeepEqual(cfg.AllowedUnsafeSysctls, []string{"kernel.msg*"}) {
		t.Errorf("decoded %+v", cfg)
	}
	// Defaults survive for fields the file does not set.
	if cfg.SyncFrequency.Duration != time.Minute || cfg.NodeStatusReportFrequency.Duration != 5*time.Minute || cfg.PodLogsDir != "/var/log/pods" ||
		Default().RuntimeRequestTimeout.Duration != 2*time.Minute {
		t.Errorf("defaults lost: sync=%v report=%v logs=%q", cfg.SyncFrequency, cfg.NodeStatusReportFrequency, cfg.PodLogsDir)
	}
	want := []v1.Taint{{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}}
	if !reflect.DeepEqual(cfg.RegisterWithTaints, want) {
		t.Errorf("taints = %v", cfg.RegisterWithTaints)
	}
	if !reflect.DeepEqual(ignored, []string{"imageMaximumGCAge"}) {
		t.Errorf("ignored = %v, want [imageMaximumGCAge]", ignored)
	}
	if lp, err := LogPolicy(cfg); err != nil || lp.MaxSize != 1<<20 || lp.MaxFiles != 5 {
		t.Errorf("LogPolicy = %+v, %v; want 1Mi, 5 files", lp, err)
	}
	if gp, err := ImageGCPolicy(cfg); err != nil || gp.HighThresholdPercent != 85 || gp.LowThresholdPercent != 80 || gp.MinAge != 2*time.Minute {
		t.Errorf("ImageGCPolicy = %+v, %v; want upstream's defaults 85/80/2m", gp, err)
	}
	// The file's evictionHard replaces the defaults: one threshold, memory.available<200Mi.
	ts, err := EvictionThresholds(cfg)
	if err != nil || len(ts) != 1 || ts[0].Signal != "memory.available" || ts[0].Value.Quantity.String() != "200Mi" || ts[0].GracePeriod != 0 {
		t.Errorf("EvictionThresholds = %v, %v; want [memory.available<200Mi hard]", ts, err)
	}
	if ts, err := EvictionThresholds(Default()); err != nil || len(ts) != 5 {
		t.Errorf("default EvictionThresholds = %v, %v; want upstream's 5", ts, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, tc := range []struct{ in, want string }{
		{head + "maxPodz: 3\n", `unknown field "maxPodz"`},
		{head + "authentication:\n  x509:\n    clientCAFiles: x\n", `unknown field "authentication.x509.clientCAFiles"`},
		{head + "port: http\n", "port"},
		{head + "port: 70000\n", "port: 70000 is not in 1-65535"},
		{head + "cgroupDriver: foo\n", `cgroupDriver: "foo"`},
		{head + "runtimeRequestTimeout: 0s\n", "runtimeRequestTimeout: 0s must be positive"},
		{head + "registerWithTaints: [{key: a, effect: Sometimes}]\n", `registerWithTaints[0]: effect "Sometimes"`},
		{head + "authentication: {anonymous: {enabled: true}}\n", "authentication.anonymous.enabled"},
		{head + "authorization: {mode: Magic}\n", `authorization.mode: "Magic" is not Webhook or AlwaysAllow`},
		{"apiVersion: v1\nkind: Pod\n", `apiVersion/kind is "v1"/"Pod"`},
		{head + "containerLogMaxSize: lots\n", `containerLogMaxSize: "lots" is not a quantity`},
		{head + "containerLogMaxFiles: 1\n", "containerLogMaxFiles: 1 must be at least 2"},
		{head + "containerLogMonitorInterval: 1s\n", "containerLogMonitorInterval: must be at least 3s"},
		{head + "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 75\n", "imageGCLowThresholdPercent: 75 must be less than imageGCHighThresholdPercent 70"},
		{head + "imageGCHighThresholdPercent: 101\n", "imageGCHighThresholdPercent: 101 is not in 0-100"},
		{head + "evictionHard: {memory.free: 1Gi}\n", `evictionHard: unsupported eviction signal "memory.free"`},
		{head + "evictionHard: {nodefs.available: 120%}\n", `evictionHard[nodefs.available]: "120%" is not a percentage`},
		{head + "evictionSoft: {memory.available: 1Gi}\n", "evictionSoftGracePeriod: no grace period for soft threshold memory.available"},
		{head + "evictionSoftGracePeriod: {memory.available: 1m}\n", "evictionSoftGracePeriod[memory.available]: no evictionSoft threshold"},
		{head + "evictionMinimumReclaim: {pid.available: \"10\"}\n", "evictionMinimumReclaim[pid.available]: no evictionHard or evictionSoft threshold"},
	} {
		_, _, err := Decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) error = %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	p := writeFile(t, sample)
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := AddFlags(fs)
	if err := fs.Parse([]string{"--config", p, "--port", "12250", "--cluster-dns", "10.0.0.10,10.0.0.11", "--register-with-taints", "a=b:NoExecute"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 12250 {
		t.Errorf("port = %d, want the flag's 12250", cfg.Port)
	}
	if cfg.MaxPods != 50 || cfg.Address != "127.0.0.1" {
		t.Errorf("file values lost: maxPods=%d address=%q (flags not set must not override the file)", cfg.MaxPods, cfg.Address)
	}
	if !reflect.DeepEqual(cfg.ClusterDNS, []string{"10.0.0.10", "10.0.0.11"}) {
		t.Errorf("clusterDNS = %v", cfg.ClusterDNS)
	}
	if want := []v1.Taint{{Key: "a", Value: "b", Effect: v1.TaintEffectNoExecute}}; !reflect.DeepEqual(cfg.RegisterWithTaints, want) {
		t.Errorf("taints = %v", cfg.RegisterWithTaints)
	}

	// Without --config, flags apply over the defaults.
	fs = pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f = AddFlags(fs)
	if err := fs.Parse([]string{"--max-pods", "7"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = f.Resolve(); err != nil || cfg.MaxPods != 7 || cfg.Port != 10250 {
		t.Errorf("Resolve without file: %+v, %v", cfg, err)
	}

	fs = pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f = AddFlags(fs)
	if err := fs.Parse([]string{"--config", writeFile(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nbogus: 1\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resolve(); err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Errorf("Resolve with unknown field: %v", err)
	}
}

func TestParseTaintsAndLabels(t *testing.T) {
	got, err := ParseTaints("a=b:NoSchedule, c:PreferNoSchedule")
	want := []v1.Taint{{Key: "a", Value: "b", Effect: "NoSchedule"}, {Key: "c", Effect: "PreferNoSchedule"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTaints = %v, %v", got, err)
	}
	for _, bad := range []string{"a=b", "a:Never", "bad key:NoSchedule"} {
		if _, err := ParseTaints(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTaints(%q) error = %v", bad, err)
		}
	}
	l, err := ParseLabels("node.kubernetes.io/pool=x,zone=a,topology.kubernetes.io/zone=z1")
	if err != nil || !reflect.DeepEqual(l, map[string]string{"node.kubernetes.io/pool": "x", "zone": "a", "topology.kubernetes.io/zone": "z1"}) {
		t.Errorf("ParseLabels = %v, %v", l, err)
	}
	for _, restricted := range []string{"node-role.kubernetes.io/worker=", "node-restriction.kubernetes.io/pool=secure", "example.k8s.io/x=y"} {
		if _, err := ParseLabels(restricted); err == nil || !strings.Contains(err.Error(), "NodeRestriction refuses them") {
			t.Errorf("ParseLabels(%s) error = %v, want the NodeRestriction refusal", restricted, err)
		}
	}
	if _, err := ParseLabels("zone"); err == nil || !strings.Contains(err.Error(), `label "zone"`) {
		t.Errorf("ParseLabels(zone) error = %v", err)
	}
}
