// Package ipam allocates pod IPv4 addresses from the node's podCIDR ranges and persists the allocations on
// disk, so they survive plugin restarts and are shared by concurrent plugin invocations (CNI spec 1.1.0
// §"IP Allocation": the plugin, not the runtime, owns the allocation state).
//
// Layout under <dataDir>/<network>/:
//
//	lock                  flock(2) taken exclusively around every read-modify-write
//	locks/<xx>            flock(2) serialising the commands of one attachment (LockAttachment); 256
//	                      stripes chosen by a hash of containerID + ifname, so the files stay bounded
//	ips/<ip>              one file per allocated address, the whole record of the allocation:
//	                      "<containerID>\n<ifname>\n<netns path>\n" (the netns line may be empty)
//	last_reserved_ip      where the next allocation search starts (round robin, so a released address is
//	                      not handed out again at once); a hint only
//
// A reservation is one atomic, durable step: the record is written to a temporary file in ips/ and
// fsynced, then hard-linked to ips/<ip> (link(2) fails if the address is taken, so two attachments can
// never hold one address), and the directory is fsynced. A crash at any point leaves either no
// reservation or a complete one, never an empty or half-written record, and a reservation reported to
// the runtime survives a power loss. A release removes ips/<ip> and fsyncs the directory. Stores
// written by earlier versions (an attachments/ index next to ips/, records without the netns line)
// are read as they are; the index is removed on Open.
package ipam

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ip"

	"github.com/nodekit/nodekit/cni/internal/atomicfile"
	"github.com/nodekit/nodekit/cni/internal/naming"
)

// ErrExhausted is returned (wrapped, with the ranges named) by Allocate when every address is taken.
var ErrExhausted = errors.New("no free IP address")

// Range is an inclusive span of allocatable addresses inside Subnet.
type Range struct {
	Subnet     net.IPNet
	Start, End net.IP
	Gateway    net.IP
}

// Allocation is one reserved address and the attachment (CNI "container ID" + interface name) holding it.
type Allocation struct {
	ContainerID string
	IfName      string
	// NetNS is the pod network namespace path the attachment was made in (CNI_NETNS); empty for records
	// written without one.
	NetNS string
	IP    net.IP
	Range int // index into Store.Ranges
}

// Store is the on-disk allocator of one network. It is safe for concurrent use by several processes; each
// method takes the directory's file lock for its duration.
type Store struct {
	dir    string
	Ranges []Range
}

// Open returns the store of network in dataDir, creating its directories (mode 0700).
func Open(dataDir, network string, ranges []Range) (*Store, error) {
	if network == "" || strings.ContainsAny(network, "/\x00") || network == "." || network == ".." {
		return nil, fmt.Errorf("ipam: network name %q cannot be used as a directory name", network)
	}
	dir := Dir(dataDir, network)
	for _, d := range []string{filepath.Join(dir, "ips"), filepath.Join(dir, "locks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("ipam: %w", err)
		}
	}
	// The attachments/ index of earlier versions duplicated ips/; its records are not read any more.
	if err := os.RemoveAll(filepath.Join(dir, "attachments")); err != nil {
		return nil, fmt.Errorf("ipam: %w", err)
	}
	return &Store{dir: dir, Ranges: ranges}, nil
}

// Dir is the store directory of network in dataDir (<dataDir>/<network>, the layout above).
func Dir(dataDir, network string) string { return filepath.Join(dataDir, network) }

// Allocated counts the addresses allocated in the store of network in dataDir (files under ips/);
// a store that does not exist holds none.
func Allocated(dataDir, network string) (int, error) {
	ents, err := os.ReadDir(filepath.Join(Dir(dataDir, network), "ips"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ipam: %w", err)
	}
	n := 0
	for _, e := range ents {
		if net.ParseIP(e.Name()) != nil {
			n++
		}
	}
	return n, nil
}

func (s *Store) lock() (func(), error) { return flock(filepath.Join(s.dir, "lock")) }

// LockAttachment takes an exclusive lock serialising the commands (ADD, DEL, CHECK) of the attachment
// (containerID, ifName) across processes, and returns its release. The CNI spec (1.1.0 §"Section 2")
// forbids a runtime to run parallel operations on one container; holding this lock makes an ADD racing a
// DEL end either fully attached or fully removed, never a veth without its IP. Attachments hashing to the
// same of the 256 stripes merely wait for each other. Take it before any Store method (never inside
// WithLock): the order is attachment lock, then store lock.
func (s *Store) LockAttachment(containerID, ifName string) (unlock func(), err error) {
	return flock(filepath.Join(s.dir, "locks", naming.Hash("", 1, containerID, ifName)))
}

// flock opens (creating) path and locks it exclusively; the returned func closes it, dropping the lock.
func flock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ipam: open lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ipam: flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil // closing the descriptor drops the lock
}

// Allocate reserves an address for (containerID, ifName) made in the network namespace netNS (recorded
// for GC; may be empty). If the attachment already holds one (a repeated ADD), that address is returned
// again. When every range is full the error wraps ErrExhausted. Container IDs and interface names with
// a newline are refused (they would not read back from the record).
func (s *Store) Allocate(containerID, ifName, netNS string) (Allocation, error) {
	if strings.ContainsAny(containerID+ifName+netNS, "\n\x00") {
		return Allocation{}, fmt.Errorf("ipam: container ID %q, interface %q or netns %q contains a newline or NUL", containerID, ifName, netNS)
	}
	unlock, err := s.lock()
	if err != nil {
		return Allocation{}, err
	}
	defer unlock()
	if a, ok, err := s.lookupLocked(containerID, ifName); err != nil || ok {
		return a, err
	}
	// Temporary records of reservations cut short by a crash (none is in progress: we hold the lock).
	if stale, err := filepath.Glob(filepath.Join(s.dir, "ips", ".reserve-*")); err == nil {
		for _, p := range stale {
			os.Remove(p)
		}
	}
	last := s.readLast()
	for pass := 0; pass < 2; pass++ {
		for ri, r := range s.Ranges {
			cur := r.Start
			if pass == 0 {
				if last == nil || !inRange(r, last) {
					continue
				}
				cur = ip.NextIP(last)
			}
			for ; inRange(r, cur); cur = ip.NextIP(cur) {
				if cur.Equal(r.Gateway) {
					continue
				}
				a := Allocation{ContainerID: containerID, IfName: ifName, NetNS: netNS, IP: cur, Range: ri}
				ok, err := s.reserve(a)
				if err != nil {
					return Allocation{}, err
				}
				if ok {
					// A hint: losing it in a crash only moves where the next search starts.
					_ = atomicfile.Write(filepath.Join(s.dir, "last_reserved_ip"), strings.NewReader(cur.String()), 0o600)
					return a, nil
				}
			}
		}
	}
	var spans []string
	for _, r := range s.Ranges {
		spans = append(spans, fmt.Sprintf("%s-%s in %s", r.Start, r.End, r.Subnet.String()))
	}
	return Allocation{}, fmt.Errorf("ipam: %w: all addresses of %s are allocated", ErrExhausted, strings.Join(spans, ", "))
}

// reserve records a in ips/<ip> in one atomic, durable step (see the package comment); false means the
// address is already taken.
func (s *Store) reserve(a Allocation) (bool, error) {
	ips := filepath.Join(s.dir, "ips")
	p := filepath.Join(ips, a.IP.String())
	if _, err := os.Lstat(p); err == nil {
		return false, nil
	}
	tmp, err := os.CreateTemp(ips, ".reserve-*")
	if err != nil {
		return false, fmt.Errorf("ipam: reserve %s: %w", a.IP, err)
	}
	defer os.Remove(tmp.Name()) // the link keeps the record; this name goes either way
	_, err = fmt.Fprintf(tmp, "%s\n%s\n%s\n", a.ContainerID, a.IfName, a.NetNS)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), p)
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
	}
	if err == nil {
		os.Remove(tmp.Name())
		if err = syncDir(ips); err != nil {
			os.Remove(p)
		}
	}
	if err != nil {
		return false, fmt.Errorf("ipam: reserve %s: %w", a.IP, err)
	}
	return true, nil
}

// syncDir fsyncs a directory, making the creation or removal of its entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lookup returns the allocation of (containerID, ifName); ok is false when it has none.
func (s *Store) Lookup(containerID, ifName string) (a Allocation, ok bool, err error) {
	unlock, err := s.lock()
	if err != nil {
		return Allocation{}, false, err
	}
	defer unlock()
	return s.lookupLocked(containerID, ifName)
}

// lookupLocked scans ips/ for the attachment's record (a node's podCIDR holds a few hundred addresses).
func (s *Store) lookupLocked(containerID, ifName string) (Allocation, bool, error) {
	all, err := s.listLocked()
	if err != nil {
		return Allocation{}, false, err
	}
	for _, a := range all {
		if a.ContainerID == containerID && a.IfName == ifName {
			return a, true, nil
		}
	}
	return Allocation{}, false, nil
}

// Release frees the address of (containerID, ifName). Releasing an attachment that holds nothing is not an
// error (CNI DEL must be idempotent); ok reports whether something was freed.
func (s *Store) Release(containerID, ifName string) (a Allocation, ok bool, err error) {
	unlock, err := s.lock()
	if err != nil {
		return Allocation{}, false, err
	}
	defer unlock()
	a, ok, err = s.lookupLocked(containerID, ifName)
	if err != nil || !ok {
		return a, ok, err
	}
	return a, true, s.releaseLocked(a)
}

func (s *Store) releaseLocked(a Allocation) error {
	ips := filepath.Join(s.dir, "ips")
	if err := os.Remove(filepath.Join(ips, a.IP.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ipam: release %s: %w", a.IP, err)
	}
	if err := syncDir(ips); err != nil {
		return fmt.Errorf("ipam: release %s: %w", a.IP, err)
	}
	return nil
}

// List returns every allocation, in directory order.
func (s *Store) List() ([]Allocation, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.listLocked()
}

func (s *Store) listLocked() ([]Allocation, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "ips"))
	if err != nil {
		return nil, fmt.Errorf("ipam: %w", err)
	}
	out := make([]Allocation, 0, len(ents))
	for _, e := range ents {
		addr := net.ParseIP(e.Name()).To4()
		if addr == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "ips", e.Name()))
		if err != nil {
			continue // released meanwhile by a process not honouring the lock; nothing to report
		}
		lines := strings.Split(string(b), "\n")
		for len(lines) < 3 {
			lines = append(lines, "")
		}
		out = append(out, Allocation{ContainerID: lines[0], IfName: lines[1], NetNS: lines[2], IP: addr, Range: s.rangeOf(addr)})
	}
	return out, nil
}

// GC releases every allocation for which keep returns false (CNI spec 1.1.0 §GC: the runtime lists the
// valid attachments; everything else is garbage) and returns what it released.
func (s *Store) GC(keep func(containerID, ifName string) bool) ([]Allocation, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := s.listLocked()
	if err != nil {
		return nil, err
	}
	var freed []Allocation
	for _, a := range all {
		if keep(a.ContainerID, a.IfName) {
			continue
		}
		if err := s.releaseLocked(a); err != nil {
			return freed, err
		}
		freed = append(freed, a)
	}
	return freed, nil
}

func (s *Store) readLast() net.IP {
	b, err := os.ReadFile(filepath.Join(s.dir, "last_reserved_ip"))
	if err != nil {
		return nil
	}
	return net.ParseIP(strings.TrimSpace(string(b))).To4()
}

func (s *Store) rangeOf(addr net.IP) int {
	for i, r := range s.Ranges {
		if inRange(r, addr) {
			return i
		}
	}
	return -1
}

func inRange(r Range, addr net.IP) bool {
	return ip.Cmp(addr, r.Start) >= 0 && ip.Cmp(addr, r.End) <= 0
}

// WithLock runs fn holding the network's lock, to serialise node-level changes (bridge, iptables) made by
// concurrent plugin invocations.
func (s *Store) WithLock(fn func() error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}
