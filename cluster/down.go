package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/cni/teardown"
	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/runtime/containerd"
)

// DownOptions says what Down removes.
// FlagPurge is `nodekit down`'s flag for DownOptions.Purge.
const FlagPurge = "purge"

type DownOptions struct {
	// DataDir is the cluster's data directory (as given to Up). Required.
	DataDir string
	// Purge also removes the data directory (etcd, PKI, images, containerd root, logs), the CNI
	// conflist and the CNI IPAM store: the host is left as before the first Up.
	Purge bool
	// StopTimeout is the grace between SIGTERM and SIGKILL for a running `up` and its children (default 90 s).
	StopTimeout time.Duration
	// Logger receives one line per step; default slog.Default().
	Logger *slog.Logger
}

// Down stops a running `nodekit up` on DataDir (and any component it left behind), then removes
// everything the cluster made on the host besides its data: every pod sandbox and container through
// CRI (which tears down their network namespaces and veths), the managed containerd and the mounts
// under DataDir, the proxy's iptables rules, the CNI plugin's masquerade and portmap chains, the node
// bridge, and the pods' log directories. With Purge it removes the data directory, the conflist and the
// IPAM store too. Every step runs even if an earlier one failed; the errors are joined.
func Down(ctx context.Context, o DownOptions) error {
	if o.DataDir == "" {
		return errors.New("down: DataDir is required")
	}
	dd, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 90 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if _, err := os.Stat(dd); errors.Is(err, os.ErrNotExist) {
		// Nothing of this data dir exists: the host-wide names (conflist, bridge, chains) may belong to
		// another data dir's cluster, so they are left alone.
		log.Info("nothing to do: the data directory does not exist", "dir", dd)
		return nil
	}
	st, err := ReadState(dd)
	if err != nil {
		return err
	}
	var errs []error
	// 1. Processes: `up` first (it stops its children in order), then any child it left behind.
	if st.UpPID != 0 && processAlive(st.UpPID, "up") {
		log.Info("stopping nodekit up", "pid", st.UpPID)
		errs = append(errs, terminate(st.UpPID, o.StopTimeout))
	}
	for _, name := range []string{"proxy", "agent", "server"} {
		pid := readPID(pidFilePath(dd, name))
		if pid != 0 && processAlive(pid, name) && processUses(pid, dd) {
			log.Info("stopping component", "proc", name, "pid", pid)
			errs = append(errs, terminate(pid, o.StopTimeout))
		}
		_ = os.Remove(pidFilePath(dd, name))
	}
	// 2. Pods and containers, through the managed containerd (started for the purpose if needed).
	podUIDs, err := removePods(ctx, dd, st, log)
	errs = append(errs, err)
	for _, uid := range podUIDs {
		dirs, _ := filepath.Glob(filepath.Join(st.PodLogsDir, "*_*_"+uid))
		for _, d := range dirs {
			log.Info("removing pod logs", "dir", d)
			errs = append(errs, os.RemoveAll(d))
		}
	}
	// 3. Service rules, then the pod network.
	log.Info("removing the proxy's rules")
	errs = append(errs, proxy.Cleanup(ctx))
	errs = append(errs, teardown.Network(teardown.Options{ConfList: agent.Config{CNIConfDir: st.CNIConfDir}.Paths().Conflist,
		Purge: o.Purge, OwnedDir: dd, Logger: log}))
	// 4. Mounts and data.
	if err := containerd.UnmountAll(dd); err != nil {
		errs = append(errs, err)
	}
	if o.Purge {
		log.Info("removing the data directory", "dir", dd)
		errs = append(errs, os.RemoveAll(dd))
	}
	return errors.Join(errs...)
}

// removePods removes every pod and container of dataDir's managed containerd (runtime teardown) and
// returns the pod UIDs it found.
func removePods(ctx context.Context, dataDir string, st State, log *slog.Logger) ([]string, error) {
	paths := agent.Config{DataDir: dataDir, CNIConfDir: st.CNIConfDir}.Paths()
	binDirs := []string{paths.CNIBin}
	for _, d := range containerd.DefaultCNIBinDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			binDirs = append(binDirs, d)
		}
	}
	return containerd.RemovePods(ctx, containerd.Config{Dir: paths.Containerd, Binary: st.Containerd,
		CNIConfDir: st.CNIConfDir, CNIBinDirs: binDirs, Logger: log.With("proc", "containerd"), StartTimeout: 90 * time.Second})
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// terminate sends SIGTERM to pid, waits up to grace, then SIGKILL.
func terminate(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil // gone already
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil
	}
	time.Sleep(500 * time.Millisecond)
	return fmt.Errorf("pid %d did not stop within %s: killed", pid, grace)
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// processUses reports whether pid's command line names dataDir (so only this cluster's components are
// signalled).
func processUses(pid int, dataDir string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(b), "\x00"+dataDir+"\x00")
}
