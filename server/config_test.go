package server

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodekit/nodekit/controlplane/addons"
	apiserver "github.com/nodekit/nodekit/controlplane/apiserver/server"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/etcd"
)

// parse binds a fresh DefaultConfig to a flag set, as cmd/nodekit does, and parses args into it.
func parse(t *testing.T, args []string) Config {
	t.Helper()
	got := DefaultConfig("/d")
	fs := pflag.NewFlagSet(CommandName, pflag.ContinueOnError)
	BindFlags(fs, &got)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return got
}

func TestArgsRoundTripThroughFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"zero is the defaults", Config{DataDir: "/d"}, nil},
		{"defaults spelled out", DefaultConfig("/d"), nil},
		{"every flag", Config{DataDir: "/d",
			APIServer: apiserver.Options{BindAddress: "172.30.0.1", Port: 16443, AdvertiseAddress: "172.30.0.1",
				ExtraSANs: []string{"10.0.0.9", "api.example"}, ServiceCIDR: "10.97.0.0/16", NodePortRange: "31000-31999",
				TokenFile: "/etc/tokens.csv", DefaultTolerationSeconds: 15},
			Etcd: etcd.Config{ClientAddr: "127.0.0.1:12379", Servers: []string{"https://e1:2379", "https://e2:2379"},
				CAFile: "/e/ca.crt", CertFile: "/e/c.crt", KeyFile: "/e/c.key"},
			Controllers: controllers.Options{ClusterCIDR: "10.150.0.0/16", NodeCIDRMaskSize: 26,
				NodeMonitorGracePeriod: 20 * time.Second, NodeMonitorPeriod: 2 * time.Second,
				ClusterSigningDuration: 48 * time.Hour, Controllers: []string{controllers.NodeIPAM, controllers.Namespace}},
			Addons: addons.Options{Disabled: []string{addons.CoreDNS}},
		}, []string{"--bind-address=172.30.0.1", "--secure-port=16443", "--advertise-address=172.30.0.1",
			"--tls-san=10.0.0.9,api.example", "--service-cluster-ip-range=10.97.0.0/16", "--service-node-port-range=31000-31999",
			"--token-auth-file=/etc/tokens.csv", "--default-not-ready-toleration-seconds=15", "--etcd-listen-client=127.0.0.1:12379",
			"--etcd-servers=https://e1:2379,https://e2:2379", "--etcd-cafile=/e/ca.crt", "--etcd-certfile=/e/c.crt",
			"--etcd-keyfile=/e/c.key", "--cluster-cidr=10.150.0.0/16", "--node-cidr-mask-size=26",
			"--node-monitor-grace-period=20s", "--node-monitor-period=2s", "--cluster-signing-duration=48h0m0s",
			"--controllers=nodeipam,namespace", "--disable=coredns"}},
		{"some", Config{DataDir: "/d", APIServer: apiserver.Options{Port: 7443}, Controllers: controllers.Options{ClusterCIDR: "10.42.0.0/16"}},
			[]string{"--secure-port=7443", "--cluster-cidr=10.42.0.0/16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.cfg.FlagArgs()
			if !slices.Equal(args, tc.want) {
				t.Fatalf("FlagArgs() = %q, want %q", args, tc.want)
			}
			if full := tc.cfg.Args(); !slices.Equal(full, append([]string{CommandName, "--data-dir", tc.cfg.DataDir}, tc.want...)) {
				t.Fatalf("Args() = %q, want the command, --data-dir %s and FlagArgs", full, tc.cfg.DataDir)
			}
			got, want := parse(t, args), tc.cfg.WithDefaults()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parsed FlagArgs() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestDefaultsAreTheFlagDefaults(t *testing.T) {
	got := parse(t, nil)
	if !reflect.DeepEqual(got, DefaultConfig("/d")) {
		t.Fatalf("no flags = %+v, want DefaultConfig %+v", got, DefaultConfig("/d"))
	}
	if got.APIServer.ServiceCIDR != "10.96.0.0/12" || got.APIServer.Port != 6443 || got.Etcd.ClientAddr != "127.0.0.1:2379" ||
		got.Controllers.ClusterCIDR != "10.244.0.0/16" || got.Controllers.NodeMonitorGracePeriod != 40*time.Second {
		t.Fatalf("defaults changed: %+v", got)
	}
}

func TestPaths(t *testing.T) {
	p := Config{DataDir: "/var/lib/nodekit"}.Paths()
	want := Paths{DataDir: "/var/lib/nodekit", EtcdDir: "/var/lib/nodekit/etcd", PKIDir: "/var/lib/nodekit/pki",
		CACert: "/var/lib/nodekit/pki/ca.crt", AdminKubeconfig: "/var/lib/nodekit/admin.kubeconfig",
		SchedulerKubeconfig: "/var/lib/nodekit/scheduler.kubeconfig", ControllerManagerKubeconfig: "/var/lib/nodekit/controller-manager.kubeconfig",
		Components: "/var/lib/nodekit/components", Logs: "/var/lib/nodekit/logs"}
	if p != want {
		t.Fatalf("Paths() = %+v, want %+v", p, want)
	}
	if f := p.LogFile("kube-scheduler"); f != "/var/lib/nodekit/logs/kube-scheduler.log" {
		t.Errorf("LogFile = %s", f)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{DataDir: "/d"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.APIServer.Port = 70000 }, "--secure-port: 70000 is not in 1-65535"},
		{func(c *Config) { c.APIServer.ServiceCIDR = "10.96.0.0/40" }, "--service-cluster-ip-range: invalid CIDR address: 10.96.0.0/40"},
		{func(c *Config) { c.Controllers.ClusterCIDR = "10.244.0.0" }, "--cluster-cidr: invalid CIDR address"},
		{func(c *Config) { c.Controllers.NodeCIDRMaskSize = 16 }, "--node-cidr-mask-size: 16 must be longer than --cluster-cidr's /16"},
		{func(c *Config) { c.APIServer.NodePortRange = "32767-30000" }, `--service-node-port-range: "32767-30000"`},
		{func(c *Config) { c.APIServer.NodePortRange = "30000" }, `--service-node-port-range: "30000"`},
		{func(c *Config) { c.Addons.Disabled = []string{"dns"} }, `--disable: unknown add-on "dns"`},
		{func(c *Config) { c.APIServer.ServiceCIDR = "10.96.0.0/29" }, "--service-cluster-ip-range: service CIDR 10.96.0.0/29 is too small for the cluster DNS address"},
	} {
		c := Config{DataDir: "/d"}
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if err := Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run() = %v, want %q before anything starts", err, tc.want)
		}
	}
}
