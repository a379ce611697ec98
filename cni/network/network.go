// Package network issues, from the node agent, the two CNI verbs that are about the node's network as a
// whole rather than one attachment (CNI spec 1.1.0 §STATUS and §GC), through libcni as a runtime does:
//
//   - Status reports whether pods can get a network now: every plugin of the network configuration the
//     runtime loads is found in the bin dirs and answers VERSION, and answers STATUS without error.
//     containerd 2.x runs STATUS itself for its CRI NetworkReady condition; containerd 1.x only checks
//     that a configuration exists, so a missing plugin binary would go unreported without this.
//   - GC hands the plugins the list of attachments that are still valid; everything else they hold (IPs,
//     veths, hostPort rules, network namespaces) is released. No runtime nodekit supports calls GC.
//
// Both run at spec 1.1.0 when every plugin of the configuration supports it, whatever cniVersion the
// configuration declares (nodekit writes 1.0.0 for containerd 1.x, whose libcni parses no later
// version); a configuration whose plugins do not support 1.1.0 gets no STATUS or GC (libcni's rule).
package network

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// gcVersion is the CNI spec version that defines STATUS and GC.
const gcVersion = "1.1.0"

// Network is the node's pod network as the runtime sees it.
type Network struct {
	// ConfDir is the CNI configuration directory the runtime loads; like containerd's CRI, the first
	// .conf, .conflist or .json file in lexical order is the network.
	ConfDir string
	// BinDirs are searched, in order, for the plugin executables.
	BinDirs []string
	// CacheDir is libcni's result cache for these calls. It must not be the runtime's (libcni's GC sends
	// DEL for every cached attachment not listed valid); nodekit's calls cache nothing, so it stays empty.
	CacheDir string
}

// ErrNoConfig is returned (wrapped) by Status when ConfDir holds no network configuration yet.
var ErrNoConfig = errors.New("no network config found")

// load returns the configuration the runtime uses, upgraded to gcVersion when every plugin supports it
// (ok false otherwise), with the libcni client for it.
func (n Network) load(ctx context.Context) (list *libcni.NetworkConfigList, cni *libcni.CNIConfig, ok bool, err error) {
	files, err := libcni.ConfFiles(n.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, nil, false, fmt.Errorf("cni: %s: %w", n.ConfDir, err)
	}
	if len(files) == 0 {
		return nil, nil, false, fmt.Errorf("cni: %w in %s", ErrNoConfig, n.ConfDir)
	}
	slices.Sort(files)
	if filepath.Ext(files[0]) == ".conflist" {
		list, err = libcni.ConfListFromFile(files[0])
	} else {
		var conf *libcni.PluginConfig
		if conf, err = libcni.ConfFromFile(files[0]); err == nil {
			list, err = libcni.ConfListFromConf(conf)
		}
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("cni: %s: %w", files[0], err)
	}
	cni = libcni.NewCNIConfigWithCacheDir(n.BinDirs, n.CacheDir, nil)
	ok = true
	for _, p := range list.Plugins {
		info, err := cni.GetVersionInfo(ctx, p.Network.Type)
		if err != nil {
			return nil, nil, false, fmt.Errorf("cni: network %s: plugin %s: %w", list.Name, p.Network.Type, err)
		}
		ok = ok && slices.Contains(info.SupportedVersions(), gcVersion)
	}
	if gt, _ := version.GreaterThanOrEqualTo(list.CNIVersion, gcVersion); ok && !gt {
		list.CNIVersion = gcVersion // STATUS and GC inject it into each plugin's configuration
	}
	return list, cni, ok, nil
}

// Status returns nil when the network's plugins can serve ADD, else the reason, naming the network and
// the plugin (e.g. `cni: network nodekit: plugin nodekit-cni: failed to find plugin "nodekit-cni" in
// path [...]`). Without a configuration it returns an error wrapping ErrNoConfig.
func (n Network) Status(ctx context.Context) error {
	list, cni, ok, err := n.load(ctx)
	if err != nil || !ok {
		return err
	}
	if err := cni.GetStatusNetworkList(ctx, list); err != nil {
		return fmt.Errorf("cni: network %s: %w", list.Name, err)
	}
	return nil
}

// GC runs the GC verb of the network's plugins with valid as cni.dev/valid-attachments. Without a
// configuration there is nothing to collect and GC returns nil.
func (n Network) GC(ctx context.Context, valid []types.GCAttachment) error {
	list, cni, ok, err := n.load(ctx)
	if errors.Is(err, ErrNoConfig) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if err := cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		return fmt.Errorf("cni: network %s: GC: %w", list.Name, err)
	}
	return nil
}
