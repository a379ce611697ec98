package nodestatus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Machine is what the node reports about its hardware and OS. ReadMachine fills it from the host;
// tests may give their own.
type Machine struct {
	// NumCPU is the number of logical CPUs usable by this process (capacity "cpu").
	NumCPU int
	// MemoryBytes is MemTotal from /proc/meminfo (capacity "memory").
	MemoryBytes int64
	// EphemeralStorageBytes is the size of the filesystem holding the kubelet root dir (capacity
	// "ephemeral-storage"), from statfs.
	EphemeralStorageBytes int64
	// KernelVersion is uname's release, e.g. "6.1.0-28-amd64".
	KernelVersion string
	// OSImage is PRETTY_NAME from /etc/os-release, e.g. "Debian GNU/Linux 12 (bookworm)".
	OSImage string
	// MachineID is /etc/machine-id (or /var/lib/dbus/machine-id); SystemUUID is the DMI product UUID;
	// BootID is /proc/sys/kernel/random/boot_id. Each is "" when the host does not have it.
	MachineID, SystemUUID, BootID string
}

// ReadMachine reads the host's Machine; rootDir is the kubelet root directory whose filesystem gives
// ephemeral-storage. Errors name the file or call that failed (/proc/meminfo, statfs <rootDir>,
// uname); the optional IDs and the OS image are left empty when their files are missing.
func ReadMachine(rootDir string) (*Machine, error) {
	m := &Machine{NumCPU: runtime.NumCPU()}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m.MemoryBytes = mem
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s (kubelet root dir, for ephemeral-storage): %w", rootDir, err)
	}
	m.EphemeralStorageBytes = int64(st.Blocks) * st.Bsize
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	m.KernelVersion = unix.ByteSliceToString(u.Release[:])
	m.OSImage = osImage("/etc/os-release")
	m.MachineID = firstFile("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.SystemUUID = firstFile("/sys/class/dmi/id/product_uuid")
	m.BootID = firstFile("/proc/sys/kernel/random/boot_id")
	return m, nil
}

// memTotal returns MemTotal in bytes from a /proc/meminfo-formatted file.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemTotal %q: %w", path, f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

// osImage returns PRETTY_NAME from an os-release file (os-release(5)), or "Linux" without one.
func osImage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			if s, err := strconv.Unquote(v); err == nil {
				return s
			}
			return strings.Trim(v, `"'`)
		}
	}
	return "Linux"
}

// firstFile returns the trimmed content of the first readable path, or "".
func firstFile(paths ...string) string {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return ""
}

// DefaultRouteIP returns the first global unicast IPv4 address of the interface that holds the IPv4
// default route (the address upstream's kubelet picks as InternalIP when --node-ip is not given).
// Errors say that there is no default route or no usable address on its interface; pass --node-ip then.
func DefaultRouteIP() (net.IP, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		link, err := netlink.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				return a.IP, nil
			}
		}
		return nil, fmt.Errorf("default route interface %s has no global IPv4 address; set --node-ip", link.Attrs().Name)
	}
	return nil, errors.New("no IPv4 default route; set --node-ip")
}
