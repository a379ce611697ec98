package eviction

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// observation is one signal's figures: what is available of capacity.
type observation struct {
	available, capacity int64
}

// Observations maps each signal to its figures.
type Observations map[Signal]observation

// Available returns what the signal has available, and whether it was observed.
func (o Observations) Available(s Signal) (int64, bool) {
	v, ok := o[s]
	return v.available, ok
}

// ImageFsFunc returns the image filesystem's capacity, available bytes, and total and free inodes.
type ImageFsFunc func(ctx context.Context) (capacity, available, inodes, inodesFree uint64, err error)

// observer reads the node's figures. The paths are parameters so tests can read fixtures.
type observer struct {
	meminfo    string // /proc/meminfo
	memcgRoot  string // cgroup v1 memory controller root, /sys/fs/cgroup/memory
	pidMax     string // /proc/sys/kernel/pid_max
	threadsMax string // /proc/sys/kernel/threads-max
	nodeFsPath string // the kubelet's root dir
	imageFs    ImageFsFunc
	countProcs func() (int64, error)
}

// observe reads every signal it can; a signal that cannot be read is missing from the result (its
// thresholds are then not met), and the errors are returned joined into one message.
func (o *observer) observe(ctx context.Context) (Observations, []error) {
	obs := Observations{}
	var errs []error
	if avail, capacity, err := o.memory(); err != nil {
		errs = append(errs, fmt.Errorf("memory.available: %w", err))
	} else {
		obs[SignalMemoryAvailable] = observation{avail, capacity}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(o.nodeFsPath, &st); err != nil {
		errs = append(errs, fmt.Errorf("nodefs %s: %w", o.nodeFsPath, err))
	} else {
		obs[SignalNodeFsAvailable] = observation{int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize}
		obs[SignalNodeFsInodesFree] = observation{int64(st.Ffree), int64(st.Files)}
	}
	if o.imageFs != nil {
		if c, a, i, f, err := o.imageFs(ctx); err != nil {
			errs = append(errs, fmt.Errorf("imagefs: %w", err))
		} else {
			obs[SignalImageFsAvailable] = observation{int64(a), int64(c)}
			obs[SignalImageFsInodesFree] = observation{int64(f), int64(i)}
		}
	}
	if avail, capacity, err := o.pids(); err != nil {
		errs = append(errs, fmt.Errorf("pid.available: %w", err))
	} else {
		obs[SignalPIDAvailable] = observation{avail, capacity}
	}
	return obs, errs
}

// memory computes memory.available as upstream does on Linux: capacity (MemTotal) minus the root
// cgroup's working set (memory.usage_in_bytes minus memory.stat total_inactive_file, cgroup v1). Without
// a cgroup v1 memory controller it falls back to /proc/meminfo's MemAvailable.
func (o *observer) memory() (available, capacity int64, err error) {
	mi, err := readKV(o.meminfo)
	if err != nil {
		return 0, 0, err
	}
	total, ok := mi["MemTotal"]
	if !ok {
		return 0, 0, fmt.Errorf("%s: no MemTotal", o.meminfo)
	}
	total *= 1024
	usage, uerr := readInt(o.memcgRoot + "/memory.usage_in_bytes")
	stat, serr := readKV(o.memcgRoot + "/memory.stat")
	if uerr != nil || serr != nil {
		avail, ok := mi["MemAvailable"]
		if !ok {
			return 0, 0, fmt.Errorf("no cgroup v1 memory root (%v) and %s has no MemAvailable", uerr, o.meminfo)
		}
		return avail * 1024, total, nil
	}
	ws := max(usage-stat["total_inactive_file"], 0)
	return max(total-ws, 0), total, nil
}

// pids computes pid.available as upstream: min(pid_max, threads-max) minus the number of processes.
func (o *observer) pids() (available, capacity int64, err error) {
	capacity, err = readInt(o.pidMax)
	if err != nil {
		return 0, 0, err
	}
	if t, err := readInt(o.threadsMax); err == nil && t < capacity {
		capacity = t
	}
	n, err := o.countProcs()
	if err != nil {
		return 0, 0, err
	}
	return capacity - n, capacity, nil
}

// sysinfoProcs is the kernel's process count (sysinfo(2) procs), what upstream's stats use.
func sysinfoProcs() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, err
	}
	return int64(si.Procs), nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKV reads "key value" or "key: value kB" lines into numbers (the values' first field).
func readKV(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return out, sc.Err()
}
