// Package hostlock serializes test packages that need a host-wide resource no unique name can isolate.
// A `nodekit up` cluster's service proxy owns the host's NODEKIT-* iptables chains (one node per host, as
// in production), so two test packages running `nodekit up` at once (go test -p 2) would rewrite each
// other's Service rules; `down --purge` of one removes the other's. Such packages hold ServiceProxy for
// their run.
package hostlock

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ServiceProxy names the lock of the host's service proxy chains.
const ServiceProxy = "nodekit-e2e-service-proxy"

// Dir holds the lock files.
const Dir = "/run/lock"

// Lock blocks until this process holds the exclusive flock of name (a file in Dir) and returns the
// function that releases it. The kernel releases it too when the process exits, so a crashed test never
// leaves it held. Errors: the lock file cannot be opened or flocked.
func Lock(name string) (unlock func(), err error) {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(Dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hostlock %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("hostlock %s: flock: %w", name, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
