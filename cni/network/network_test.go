package network

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/config"
)

// TestStatus runs the real nodekit-cni: with no configuration Status wraps ErrNoConfig and GC does
// nothing; with the plugin missing Status names the network and the plugin; with it installed a 1.0.0
// configuration (what containerd 1.x is given) passes STATUS, run at 1.1.0.
func TestStatus(t *testing.T) {
	bin, err := cnitest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnitest.Cleanup)
	confDir, empty, data := t.TempDir(), t.TempDir(), t.TempDir()
	ctx := context.Background()
	n := Network{ConfDir: confDir, BinDirs: []string{empty}, CacheDir: filepath.Join(data, "cache")}
	if err := n.Status(ctx); !errors.Is(err, ErrNoConfig) {
		t.Errorf("Status without a config = %v, want ErrNoConfig", err)
	}
	if err := n.GC(ctx, nil); err != nil {
		t.Errorf("GC without a config = %v", err)
	}
	b, err := config.Render(config.Options{NetworkName: "nk-status", PodCIDR: "10.250.9.0/24", ClusterCIDR: "10.250.0.0/16",
		DataDir: filepath.Join(data, "ipam"), CNIVersion: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-nodekit.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = n.Status(ctx)
	if want := `cni: network nk-status: plugin nodekit-cni: failed to find plugin "nodekit-cni" in path [` + empty + `]`; err == nil || err.Error() != want {
		t.Errorf("Status with the plugin missing = %v, want %q", err, want)
	}
	n.BinDirs = []string{bin}
	if err := n.Status(ctx); err != nil {
		t.Errorf("Status with the plugin installed = %v", err)
	}
	// STATUS at 1.1.0 opened the IPAM store: the plugin really ran.
	if _, err := os.Stat(filepath.Join(data, "ipam", "nk-status", "ips")); err != nil {
		t.Errorf("STATUS did not reach the plugin: %v", err)
	}
	if entries, _ := os.ReadDir(n.CacheDir); len(entries) != 0 {
		t.Errorf("libcni cached something: %v", entries)
	}
}
