package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/nodekit/nodekit/cni/cnitest"
)

func TestWriteAndReady(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "net.d", "10-nodekit.conflist")
	ctx := context.Background()
	if err := Ready(ctx, path); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready before Write = %v, want ErrNotReady", err)
	}
	o := Options{Path: path, PodCIDR: "10.244.3.0/24", ClusterCIDR: "10.244.0.0/16", DataDir: dir}
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	if err := Ready(ctx, path); err != nil {
		t.Fatalf("Ready after Write: %v", err)
	}
	l, err := libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != DefaultNetworkName || l.CNIVersion != CNIVersion || len(l.Plugins) != 1 || l.Plugins[0].Network.Type != "nodekit-cni" ||
		!l.Plugins[0].Network.Capabilities["portMappings"] {
		t.Fatalf("unexpected conflist: %s", l.Bytes)
	}
	for _, want := range []string{`"subnet": "10.244.3.0/24"`, `"clusterCIDR": "10.244.0.0/16"`, `"hairpinMode": true`} {
		if !strings.Contains(string(l.Bytes), want) {
			t.Errorf("conflist lacks %s:\n%s", want, l.Bytes)
		}
	}
	// Rewriting identical content keeps the file (same inode); a change replaces it atomically.
	st1, _ := os.Stat(path)
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(path)
	if !os.SameFile(st1, st2) {
		t.Errorf("identical Write replaced the file")
	}
	o.PodCIDR = "10.244.4.0/24"
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "10.244.4.0/24") {
		t.Errorf("rewrite did not land")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left in %s: %v", filepath.Dir(path), ents)
	}
	// A broken file is not ready.
	if err := os.WriteFile(path, []byte(`{"cniVersion":"1.1.0","name":"x","plugins":[{"type":"nodekit-cni"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Ready(ctx, path); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "ipam.ranges") {
		t.Errorf("Ready on a conflist without ranges = %v", err)
	}
}

func TestRenderRejects(t *testing.T) {
	for _, o := range []Options{
		{PodCIDR: "", ClusterCIDR: "10.0.0.0/16"},
		{PodCIDR: "10.1.0.0/24", ClusterCIDR: "10.0.0.0/16"},
		{PodCIDR: "10.0.1.0/24", ClusterCIDR: "bogus"},
		{PodCIDR: "10.0.0.0/8", ClusterCIDR: "10.0.0.0/16"},
		{PodCIDR: "10.0.1.0/24", ClusterCIDR: "10.0.0.0/16", Bridge: "muchtoolongbridgename"},
	} {
		if _, err := Render(o); err == nil {
			t.Errorf("Render(%+v) succeeded", o)
		}
	}
}

// TestReadyChecksInstalledPlugin validates against a real bin dir: a missing plugin is not ready, the
// built plugin is.
func TestReadyChecksInstalledPlugin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "10-nodekit.conflist")
	if _, err := Write(Options{Path: path, PodCIDR: "10.244.3.0/24", ClusterCIDR: "10.244.0.0/16", DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := Ready(context.Background(), path, t.TempDir()); !errors.Is(err, ErrNotReady) {
		t.Errorf("Ready with an empty bin dir = %v, want ErrNotReady", err)
	}
	bin, err := cnitest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnitest.Cleanup)
	if err := Ready(context.Background(), path, bin); err != nil {
		t.Errorf("Ready with the plugin installed: %v", err)
	}
}

func TestVersionForRuntime(t *testing.T) {
	for _, c := range []struct{ name, version, want string }{
		{"containerd", "v2.4.2", "1.1.0"},
		{"containerd", "2.0.0", "1.1.0"},
		{"containerd", "1.6.20~ds1", "1.0.0"},
		{"containerd", "v1.7.3", "1.0.0"},
		{"containerd", "garbage", "1.0.0"},
		{"cri-o", "1.31.0", "1.0.0"},
	} {
		if got := VersionForRuntime(c.name, c.version); got != c.want {
			t.Errorf("VersionForRuntime(%q, %q) = %q, want %q", c.name, c.version, got, c.want)
		}
	}
}

func TestReadIsWritesInverse(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{
		{Path: filepath.Join(dir, "a.conflist"), PodCIDR: "10.244.3.0/24", ClusterCIDR: "10.244.0.0/16"},
		{Path: filepath.Join(dir, "b.conflist"), NetworkName: "lab", PodCIDR: "10.150.7.0/26", ClusterCIDR: "10.150.0.0/16",
			Bridge: "nkt9", MTU: 1400, DataDir: filepath.Join(dir, "ipam"), NoHairpin: true, CNIVersion: "1.0.0"},
	} {
		if _, err := Write(o); err != nil {
			t.Fatal(err)
		}
		got, err := Read(o.Path)
		if err != nil {
			t.Fatal(err)
		}
		want := o
		want.Defaults()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Read(Write(%+v)) = %+v, want %+v", o, got, want)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing.conflist")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want os.ErrNotExist", err)
	}
	other := filepath.Join(dir, "other.conflist")
	if err := os.WriteFile(other, []byte(`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(other); err == nil || !strings.Contains(err.Error(), "no nodekit-cni plugin") {
		t.Errorf("Read(conflist without nodekit-cni) = %v, want an error naming the missing plugin", err)
	}
}
