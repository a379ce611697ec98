// Package ipam allocates pod IPv4 addresses from the node's podCIDR ranges and persists the allocations on
// disk, so they survive plugin restarts and are shared by concurrent plugin invocations (CNI spec 1.1.0
// §"IP Allocation": the plugin, not the runtime, owns the allocation state).
//
// Layout under <dataDir>/<network>/:
//
//	lock                  flock(2) taken exclusively around every read-modify-write
//	locks/<xx>            flock(2) serialising the commands of one attachment (LockAttachment); 256
//	                      stripes chosen by a hash of containerID + ifname, so the files stay bounded
//	ips/<ip>              one file per allocated address; content "<containerID>\n<ifname>\n"
//	attachments/<key>     one file per attachment (containerID + ifname); content "<ip>\n"
//	last_reserved_ip      where the next allocation search starts (round robin, so a released address is
//	                      not handed out again at once)
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
	IP          net.IP
	Range       int // index into Store.Ranges
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
	for _, d := range []string{filepath.Join(dir, "ips"), filepath.Join(dir, "attachments"), filepath.Join(dir, "locks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("ipam: %w", err)
		}
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

// attachmentKey is a file name for (containerID, ifname): container IDs are runtime-chosen strings, so they
// are hashed rather than trusted as path elements.
func attachmentKey(containerID, ifName string) string {
	return naming.Hash("", 16, containerID, ifName)
}

// Allocate reserves an address for (containerID, ifName). If the attachment already holds one (a repeated
// ADD), that address is returned again. When every range is full the error wraps ErrExhausted.
func (s *Store) Allocate(containerID, ifName string) (Allocation, error) {
	unlock, err := s.lock()
	if err != nil {
		return Allocation{}, err
	}
	defer unlock()
	if a, ok, err := s.lookupLocked(containerID, ifName); err != nil || ok {
		return a, err
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
				ok, err := s.reserve(cur, containerID, ifName)
				if err != nil {
					return Allocation{}, err
				}
				if ok {
					_ = os.WriteFile(filepath.Join(s.dir, "last_reserved_ip"), []byte(cur.String()), 0o600)
					return Allocation{ContainerID: containerID, IfName: ifName, IP: cur, Range: ri}, nil
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

// reserve creates ips/<ip> exclusively; false means the address is already taken.
func (s *Store) reserve(addr net.IP, containerID, ifName string) (bool, error) {
	p := filepath.Join(s.dir, "ips", addr.String())
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ipam: reserve %s: %w", addr, err)
	}
	_, werr := fmt.Fprintf(f, "%s\n%s\n", containerID, ifName)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.WriteFile(filepath.Join(s.dir, "attachments", attachmentKey(containerID, ifName)), []byte(addr.String()+"\n"), 0o600)
	}
	if werr != nil {
		os.Remove(p)
		return false, fmt.Errorf("ipam: reserve %s: %w", addr, werr)
	}
	return true, nil
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

func (s *Store) lookupLocked(containerID, ifName string) (Allocation, bool, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "attachments", attachmentKey(containerID, ifName)))
	if errors.Is(err, os.ErrNotExist) {
		return Allocation{}, false, nil
	}
	if err != nil {
		return Allocation{}, false, fmt.Errorf("ipam: %w", err)
	}
	addr := net.ParseIP(strings.TrimSpace(string(b))).To4()
	if addr == nil {
		return Allocation{}, false, fmt.Errorf("ipam: attachment record of %s/%s holds %q, not an IPv4 address", containerID, ifName, b)
	}
	return Allocation{ContainerID: containerID, IfName: ifName, IP: addr, Range: s.rangeOf(addr)}, true, nil
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
	if err := os.Remove(filepath.Join(s.dir, "ips", a.IP.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ipam: release %s: %w", a.IP, err)
	}
	if err := os.Remove(filepath.Join(s.dir, "attachments", attachmentKey(a.ContainerID, a.IfName))); err != nil && !errors.Is(err, os.ErrNotExist) {
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
		id, ifName, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		out = append(out, Allocation{ContainerID: id, IfName: ifName, IP: addr, Range: s.rangeOf(addr)})
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
