// Package config writes the node's CNI network configuration, the conflist that makes the runtime call
// nodekit-cni (CNI spec 1.1.0 §"Network configuration lists"), and tells the agent whether it is in place:
// the node reports its network ready only then.
package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/libcni"

	"github.com/nodekit/nodekit/cni/internal/atomicfile"
	"github.com/nodekit/nodekit/cni/netconf"
)

// DefaultPath is where the agent writes the conflist unless told otherwise.
const DefaultPath = "/etc/cni/net.d/10-nodekit.conflist"

// DefaultNetworkName is the conflist's "name" (also the IPAM store's directory name).
const DefaultNetworkName = "nodekit"

// CNIVersion is the spec version the conflist declares by default.
const CNIVersion = "1.1.0"

// Options describe the node's network. PodCIDR and ClusterCIDR are required; the rest have defaults.
type Options struct {
	Path        string // conflist path, default DefaultPath
	NetworkName string // default DefaultNetworkName
	PodCIDR     string // the Node's spec.podCIDR, e.g. "10.244.1.0/24"
	ClusterCIDR string // all pods of the cluster, e.g. "10.244.0.0/16"; must contain PodCIDR
	Bridge      string // default netconf.DefaultBridge
	MTU         int    // bytes, default netconf.DefaultMTU
	DataDir     string // IPAM state, default netconf.DefaultDataDir
	NoHairpin   bool   // hairpin mode is on unless set
	// CNIVersion is the conflist's cniVersion, default CNIVersion (1.1.0, which brings GC and STATUS).
	// Runtimes whose libcni predates spec 1.1.0 (containerd 1.6 and 1.7) reject 1.1.0 results: use
	// "1.0.0" for them.
	CNIVersion string
	// BinDirs, when set, are searched for the plugin during validation: libcni then also checks that
	// the installed plugin exists and supports CNIVersion.
	BinDirs []string
}

// Defaults fills in the defaults of every optional field left empty (those the field docs name).
func (o *Options) Defaults() {
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.NetworkName == "" {
		o.NetworkName = DefaultNetworkName
	}
	if o.Bridge == "" {
		o.Bridge = netconf.DefaultBridge
	}
	if o.MTU == 0 {
		o.MTU = netconf.DefaultMTU
	}
	if o.DataDir == "" {
		o.DataDir = netconf.DefaultDataDir
	}
	if o.CNIVersion == "" {
		o.CNIVersion = CNIVersion
	}
}

// Render returns the conflist for o, validated by libcni (list structure) and by the plugin's own parser
// (the plugin entry), without touching the file system. Errors name the bad option.
func Render(o Options) ([]byte, error) {
	o.Defaults()
	_, pod, err := net.ParseCIDR(o.PodCIDR)
	if err != nil || pod.IP.To4() == nil {
		return nil, fmt.Errorf("cni config: PodCIDR %q is not an IPv4 CIDR", o.PodCIDR)
	}
	_, cluster, err := net.ParseCIDR(o.ClusterCIDR)
	if err != nil || cluster.IP.To4() == nil {
		return nil, fmt.Errorf("cni config: ClusterCIDR %q is not an IPv4 CIDR", o.ClusterCIDR)
	}
	po, _ := pod.Mask.Size()
	co, _ := cluster.Mask.Size()
	if !cluster.Contains(pod.IP) || po < co {
		return nil, fmt.Errorf("cni config: PodCIDR %s is not inside ClusterCIDR %s", pod, cluster)
	}
	plugin := map[string]any{
		"type":         netconf.PluginType,
		"bridge":       o.Bridge,
		"mtu":          o.MTU,
		"hairpinMode":  !o.NoHairpin,
		"clusterCIDR":  cluster.String(),
		"capabilities": map[string]bool{"portMappings": true},
		"ipam": map[string]any{
			"ranges":  []map[string]string{{"subnet": pod.String()}},
			"dataDir": o.DataDir,
		},
	}
	list := map[string]any{"cniVersion": o.CNIVersion, "name": o.NetworkName, "plugins": []any{plugin}}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if _, err := validate(context.Background(), b, o.BinDirs); err != nil {
		return nil, err
	}
	return b, nil
}

// validate parses a conflist with libcni, checks that it has a nodekit-cni entry the plugin accepts, and,
// with binDirs, asks libcni to validate it against the installed plugin.
func validate(ctx context.Context, b []byte, binDirs []string) (*libcni.NetworkConfigList, error) {
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("cni config: libcni rejects the conflist: %w", err)
	}
	found := false
	for _, p := range l.Plugins {
		if p.Network.Type != netconf.PluginType {
			continue
		}
		found = true
		full, err := libcni.InjectConf(p, map[string]any{"cniVersion": l.CNIVersion, "name": l.Name})
		if err != nil {
			return nil, fmt.Errorf("cni config: %w", err)
		}
		if _, err := netconf.Parse(full.Bytes); err != nil {
			return nil, fmt.Errorf("cni config: %s entry: %w", netconf.PluginType, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("cni config: conflist %q has no %s plugin", l.Name, netconf.PluginType)
	}
	if len(binDirs) > 0 {
		if _, err := libcni.NewCNIConfig(binDirs, nil).ValidateNetworkList(ctx, l); err != nil {
			return nil, fmt.Errorf("cni config: libcni validation against %v: %w", binDirs, err)
		}
	}
	return l, nil
}

// Write renders o and writes it to o.Path atomically (temporary file in the same directory, fsync,
// rename), creating the directory if needed. An identical file is left untouched. It returns the path.
func Write(o Options) (string, error) {
	o.Defaults()
	b, err := Render(o)
	if err != nil {
		return "", err
	}
	if old, err := os.ReadFile(o.Path); err == nil && bytes.Equal(old, b) {
		return o.Path, nil
	}
	dir := filepath.Dir(o.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cni config: %w", err)
	}
	if err := atomicfile.Write(o.Path, bytes.NewReader(b), 0o644); err != nil {
		return "", fmt.Errorf("cni config: %w", err)
	}
	return o.Path, nil
}

// Read parses the conflist at path back into the Options it was written from (Write's inverse, for
// teardown): NetworkName, Bridge, MTU, DataDir (the IPAM store's), PodCIDR (the first range's),
// ClusterCIDR, CNIVersion and Path, defaults filled in for what it leaves out. A missing file is
// os.ErrNotExist (wrapped); a conflist without a nodekit-cni entry is an error naming the file.
func Read(path string) (Options, error) {
	o := Options{Path: path}
	b, err := os.ReadFile(path)
	if err != nil {
		return o, fmt.Errorf("cni config: %w", err)
	}
	var list struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		Plugins    []netconf.NetConf `json:"plugins"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return o, fmt.Errorf("cni config: %s: %w", path, err)
	}
	o.NetworkName, o.CNIVersion = list.Name, list.CNIVersion
	for _, p := range list.Plugins {
		if p.Type != netconf.PluginType {
			continue
		}
		o.Bridge, o.MTU, o.DataDir, o.NoHairpin = p.Bridge, p.MTU, p.IPAM.DataDir, !p.HairpinMode
		if p.ClusterCIDR != nil {
			n := net.IPNet(*p.ClusterCIDR)
			o.ClusterCIDR = n.String()
		}
		if len(p.IPAM.Ranges) > 0 {
			n := net.IPNet(p.IPAM.Ranges[0].Subnet)
			o.PodCIDR = n.String()
		}
		o.Defaults()
		return o, nil
	}
	return o, fmt.Errorf("cni config: %s: no %s plugin", path, netconf.PluginType)
}

// ErrNotReady wraps every reason Ready gives.
var ErrNotReady = errors.New("pod network is not ready")

// Ready reports whether the conflist at path is in place and valid (libcni parses it and the nodekit-cni
// entry is accepted; with binDirs, the installed plugin is checked too). The agent reports the node's
// network ready (NetworkReady / NodeReady) only when Ready returns nil; the error, wrapping ErrNotReady,
// is the reason to report otherwise.
func Ready(ctx context.Context, path string, binDirs ...string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if _, err := validate(ctx, b, binDirs); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotReady, path, err)
	}
	return nil
}

// VersionForRuntime picks the conflist cniVersion a container runtime accepts, from the runtimeName
// and runtimeVersion its CRI Version call reports (e.g. "containerd", "v2.4.2" or "1.6.20~ds1").
// containerd 2.x vendors a libcni that knows spec 1.1.0 (GC, STATUS); containerd 1.x and runtimes
// nodekit does not know get "1.0.0", which every libcni since 1.0 parses.
func VersionForRuntime(runtimeName, runtimeVersion string) string {
	if runtimeName != "containerd" {
		return "1.0.0"
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(runtimeVersion, "v"), ".")
	if n, err := strconv.Atoi(major); err == nil && n >= 2 {
		return CNIVersion
	}
	return "1.0.0"
}
