// Package allocator hands out service ClusterIPs from the service CIDR and NodePorts from the node port
// range. Each allocated value is one etcd key (/registry/ranges/serviceips/<ip>,
// /registry/ranges/servicenodeports/<port>) created in a transaction only if absent, so allocations survive
// API server restarts, are never handed out twice, and are released by deleting the key.
package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFull means every value in the range is allocated.
var ErrFull = errors.New("range is full")

// ErrAllocated means the requested value is already allocated.
var ErrAllocated = errors.New("provided value is already allocated")

// ErrNotInRange means the requested value lies outside the range.
type ErrNotInRange struct{ Range string }

func (e *ErrNotInRange) Error() string { return "provided value is not in the valid range " + e.Range }

// Range is a contiguous set of values [0, Size) mapped to strings (IPs or ports).
type Range struct {
	cli    *clientv3.Client
	prefix string
	desc   string
	size   uint64
	value  func(i uint64) string
	index  func(s string) (uint64, bool)

	mu   sync.Mutex
	next uint64
}

// NewServiceIPs returns the ClusterIP range of cidr (for example 10.96.0.0/12). The network address and,
// for IPv4, the broadcast address are never handed out; the first usable address (10.96.0.1) is what
// the `kubernetes` service gets through AllocateSpecific.
func NewServiceIPs(cli *clientv3.Client, cidr *net.IPNet) (*Range, error) {
	ones, bits := cidr.Mask.Size()
	if bits-ones < 2 {
		return nil, fmt.Errorf("allocator: service CIDR %s is too small", cidr)
	}
	if bits-ones > 20 {
		return nil, fmt.Errorf("allocator: service CIDR %s is larger than /%d", cidr, bits-20)
	}
	base := new(big.Int).SetBytes(cidr.IP.To16())
	if cidr.IP.To4() != nil {
		base = new(big.Int).SetBytes(cidr.IP.To4())
	}
	size := uint64(1)<<uint(bits-ones) - 2 // skip network and broadcast
	ipLen := len(cidr.IP.To4())
	if ipLen == 0 {
		ipLen = 16
	}
	r := &Range{cli: cli, prefix: "/registry/ranges/serviceips/", desc: cidr.String(), size: size}
	r.value = func(i uint64) string {
		v := new(big.Int).Add(base, new(big.Int).SetUint64(i+1))
		b := v.FillBytes(make([]byte, ipLen))
		return net.IP(b).String()
	}
	r.index = func(s string) (uint64, bool) {
		ip := net.ParseIP(s)
		if ip == nil || !cidr.Contains(ip) {
			return 0, false
		}
		if ipLen == 4 {
			ip = ip.To4()
		}
		d := new(big.Int).Sub(new(big.Int).SetBytes(ip), base)
		if d.Sign() <= 0 || d.Uint64() > size {
			return 0, false
		}
		return d.Uint64() - 1, true
	}
	return r, nil
}

// NewNodePorts returns the NodePort range [base, base+size), for example 30000 and 2768.
func NewNodePorts(cli *clientv3.Client, base, size int) *Range {
	r := &Range{cli: cli, prefix: "/registry/ranges/servicenodeports/", desc: fmt.Sprintf("%d-%d", base, base+size-1), size: uint64(size)}
	r.value = func(i uint64) string { return strconv.Itoa(base + int(i)) }
	r.index = func(s string) (uint64, bool) {
		p, err := strconv.Atoi(s)
		if err != nil || p < base || p >= base+size {
			return 0, false
		}
		return uint64(p - base), true
	}
	return r
}

// Allocate takes the next free value for owner ("namespace/name"). It scans round-robin from the last
// allocation, so recently released values are not reused at once. ErrFull when none is free.
func (r *Range) Allocate(ctx context.Context, owner string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", fmt.Errorf("allocator %s: %w", r.desc, err)
	}
	used := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		used[string(kv.Key[len(r.prefix):])] = true
	}
	for n := uint64(0); n < r.size; n++ {
		i := (r.next + n) % r.size
		v := r.value(i)
		if used[v] {
			continue
		}
		ok, err := r.claim(ctx, v, owner)
		if err != nil {
			return "", err
		}
		if ok {
			r.next = i + 1
			return v, nil
		}
	}
	return "", fmt.Errorf("allocator %s: %w", r.desc, ErrFull)
}

// AllocateSpecific takes value v for owner (an opaque string compared exactly): *ErrNotInRange outside the
// range, ErrAllocated if taken by another owner (re-claiming one's own value succeeds).
func (r *Range) AllocateSpecific(ctx context.Context, v, owner string) error {
	i, ok := r.index(v)
	if !ok {
		return &ErrNotInRange{Range: r.desc}
	}
	v = r.value(i)
	claimed, err := r.claim(ctx, v, owner)
	if err != nil || claimed {
		return err
	}
	resp, err := r.cli.Get(ctx, r.prefix+v)
	if err != nil {
		return fmt.Errorf("allocator %s: %w", r.desc, err)
	}
	if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == owner {
		return nil
	}
	return ErrAllocated
}

// Release frees v (no error if it was free or out of range).
func (r *Range) Release(ctx context.Context, v string) error {
	if _, ok := r.index(v); !ok {
		return nil
	}
	if _, err := r.cli.Delete(ctx, r.prefix+v); err != nil {
		return fmt.Errorf("allocator %s: release %s: %w", r.desc, v, err)
	}
	return nil
}

// Contains reports whether v is in the range.
func (r *Range) Contains(v string) bool {
	_, ok := r.index(v)
	return ok
}

func (r *Range) claim(ctx context.Context, v, owner string) (bool, error) {
	key := r.prefix + v
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, owner)).Commit()
	if err != nil {
		return false, fmt.Errorf("allocator %s: claim %s: %w", r.desc, v, err)
	}
	return resp.Succeeded, nil
}

// Repair releases leaked values: those allocated but used by no service, as left by a server that died
// between allocating and storing a service. A value is released only when it was already unused, with
// the same allocation (mod revision), in the previous pass (suspects), so a create in flight during one
// pass is never robbed. It returns the suspects for the next pass and the values released.
func (r *Range) Repair(ctx context.Context, inUse map[string]bool, suspects map[string]int64) (map[string]int64, []string, error) {
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return suspects, nil, fmt.Errorf("allocator %s: repair: %w", r.desc, err)
	}
	next := map[string]int64{}
	var released []string
	for _, kv := range resp.Kvs {
		v := string(kv.Key[len(r.prefix):])
		if inUse[v] {
			continue
		}
		if rev, ok := suspects[v]; ok && rev == kv.ModRevision {
			del, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(string(kv.Key))).Commit()
			if err != nil {
				return suspects, released, fmt.Errorf("allocator %s: repair %s: %w", r.desc, v, err)
			}
			if del.Succeeded {
				released = append(released, v)
			}
			continue
		}
		next[v] = kv.ModRevision
	}
	return next, released, nil
}
