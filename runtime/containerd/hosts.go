package containerd

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// WriteRegistryHost writes <configPath>/<host>/hosts.toml telling containerd's CRI plugin to pull images
// named <host>/... from http://<host> over plain HTTP (containerd docs/hosts.md: server, and a
// [host."http://..."] entry with capabilities pull and resolve). The CRI plugin reads config_path on
// every pull, so no restart is needed. host is "ip:port" or "name:port"; only loopback addresses are
// accepted, because plain HTTP is only safe for a registry on this node (nodekit registry).
func WriteRegistryHost(configPath, host string) error {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return fmt.Errorf("registry host %q: want host:port: %w", host, err)
	}
	if ip := net.ParseIP(h); !(h == "localhost" || ip != nil && ip.IsLoopback()) {
		return fmt.Errorf("registry host %q: plain HTTP is only allowed for loopback registries", host)
	}
	dir := filepath.Join(configPath, host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	url := "http://" + host
	body := strings.Join([]string{
		"# Written by nodekit: the loopback registry of `nodekit registry`, plain HTTP.",
		"server = " + tomlString(url),
		"",
		"[host." + tomlString(url) + "]",
		`  capabilities = ["pull", "resolve"]`,
		"",
	}, "\n")
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(body), 0o644)
}
