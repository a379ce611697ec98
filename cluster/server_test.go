package cluster

import (
	"slices"
	"testing"
)

// TestServerArgs: up's and lab's servers are started with exactly the settings that differ from the
// server's defaults, spelled by server.Config.Args.
func TestServerArgs(t *testing.T) {
	up := Config{DataDir: "/d", NodeName: "n", APIBindAddress: "127.0.0.1", APIPort: 16443,
		EtcdClientAddr: "127.0.0.1:12379", ServiceCIDR: "10.97.0.0/16", ClusterCIDR: "10.150.0.0/16"}
	if err := up.complete(); err != nil {
		t.Fatal(err)
	}
	want := []string{"--bind-address=127.0.0.1", "--secure-port=16443", "--service-cluster-ip-range=10.97.0.0/16",
		"--etcd-listen-client=127.0.0.1:12379", "--cluster-cidr=10.150.0.0/16"}
	if got := up.server().FlagArgs(); !slices.Equal(got, want) {
		t.Errorf("up's server args = %q, want %q", got, want)
	}
	def := Config{DataDir: "/d", NodeName: "n"}
	if err := def.complete(); err != nil {
		t.Fatal(err)
	}
	if got := def.server().FlagArgs(); len(got) != 0 {
		t.Errorf("up's server args with the defaults = %q, want none", got)
	}

	lc := LabConfig{DataDir: "/lab", Nodes: 1}
	if err := lc.complete(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: lc.DataDir, NodeName: "x", APIBindAddress: lc.labIP(1)}
	if err := cfg.complete(); err != nil {
		t.Fatal(err)
	}
	sc := lc.server(cfg)
	if sc.DataDir != "/lab/server" || sc.Paths().AdminKubeconfig != "/lab/server/admin.kubeconfig" {
		t.Errorf("lab server data dir %s, admin kubeconfig %s", sc.DataDir, sc.Paths().AdminKubeconfig)
	}
	want = []string{"--bind-address=172.30.0.1", "--advertise-address=172.30.0.1", "--default-not-ready-toleration-seconds=15",
		"--node-monitor-grace-period=20s"}
	if got := sc.FlagArgs(); !slices.Equal(got, want) {
		t.Errorf("lab's server args = %q, want %q", got, want)
	}
}
