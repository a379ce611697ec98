// Package install puts the nodekit-cni executable into a CNI bin dir, the way the nodekit agent does at
// start-up so the runtime finds the plugin named by the conflist's "type".
package install

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/cni/internal/atomicfile"
	"github.com/nodekit/nodekit/cni/netconf"
)

// Install copies the executable src to <binDir>/nodekit-cni atomically: it writes a temporary file in
// binDir, fsyncs it, makes it executable (0755) and renames it over the destination, so a runtime exec'ing
// the plugin concurrently sees either the old or the new binary, never a partial one. binDir is created
// if missing. It returns the installed path.
func Install(src, binDir string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("cni install: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("cni install: %w", err)
	}
	dst := filepath.Join(binDir, netconf.PluginType)
	if err := atomicfile.Write(dst, in, 0o755); err != nil {
		return "", fmt.Errorf("cni install %s: %w", src, err)
	}
	return dst, nil
}
