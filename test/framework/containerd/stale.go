package containerd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/runtime/containerd"
)

// dirPrefix names every runtime directory under $TMPDIR.
const dirPrefix = "nkct-"

// lockOwner takes the flock on <dir>/.owner, held for as long as a process owns dir; nonBlocking
// fails at once (unix.EWOULDBLOCK) when another process holds it.
func lockOwner(dir string, nonBlocking bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".owner"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if nonBlocking {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reapStale removes what test binaries that died without cleanup (killed, timed out) left of their
// runtimes: a runtime dir at least a minute old whose .owner lock nobody holds, and whose socket no
// live process mentions on its command line (a surviving shim keeps the dir alone: this helper never
// kills processes it did not start). Its mounts are detached, its bridge deleted and the dir removed.
// Failures are ignored: reaping is best effort and must not fail an unrelated test.
func reapStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		lock, err := lockOwner(dir, true)
		if err != nil {
			continue // owned by a live process (or unreadable)
		}
		if !processMentions(filepath.Join(dir, "containerd.sock")) {
			containerd.UnmountAll(dir)
			if bridge := bridgeOf(dir); bridge != "" {
				if link, err := netlink.LinkByName(bridge); err == nil {
					netlink.LinkDel(link)
				}
			}
			os.RemoveAll(dir)
		}
		lock.Close()
	}
}

// bridgeOf reads the bridge name of a runtime dir's default network config ("nkt…"), if any.
func bridgeOf(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "net.d", "10-nodekit-test.conflist"))
	if err != nil {
		return ""
	}
	var conf struct {
		Plugins []struct{ Bridge string }
	}
	if json.Unmarshal(data, &conf) != nil {
		return ""
	}
	for _, p := range conf.Plugins {
		if strings.HasPrefix(p.Bridge, "nkt") {
			return p.Bridge
		}
	}
	return ""
}

// ProcessesMentioning lists the PIDs whose command line contains s (e.g. a containerd socket path:
// containerd itself and the shims it started name it).
func ProcessesMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processMentions reports whether any process's command line contains s.
func processMentions(s string) bool { return len(ProcessesMentioning(s)) > 0 }
