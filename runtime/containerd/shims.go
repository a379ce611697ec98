package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Shims lists the live containerd shims (containerd-shim-runc-v2 and friends) of the containerd whose
// socket is address: processes whose executable is named containerd-shim* and whose command line holds
// "-address <address>" (how containerd's runtime v2 starts every shim). Exited processes (zombies, with
// an empty command line) are not listed; no other process ever is.
func Shims(address string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := 1; i+1 < len(args); i++ {
			if (args[i] == "-address" || args[i] == "--address") && args[i+1] == address {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killShims SIGKILLs every shim of the containerd at address (see Shims) with its children (the
// container processes it still holds), and waits up to timeout for them to be gone or zombies. It is for
// after every pod was removed and containerd stopped: a shim left then is an orphan that no containerd
// will shut down (containerd 1.6 loses track of a sandbox's shim when it is stopped while reaping that
// sandbox). It returns the PIDs it killed; the error names any still alive.
func killShims(address string, timeout time.Duration) ([]int, error) {
	pids := Shims(address)
	for _, pid := range pids {
		for _, child := range childPIDs(pid) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for {
		left := Shims(address)
		if len(left) == 0 {
			return pids, nil
		}
		if time.Now().After(deadline) {
			return pids, fmt.Errorf("containerd: shims of %s still running %v after SIGKILL", address, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// childPIDs lists pid's children from /proc/<pid>/task/*/children.
func childPIDs(pid int) []int {
	var out []int
	files, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(field); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
