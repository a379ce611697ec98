package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
)

// ErrCIDRFull is returned when every podCIDR of the cluster CIDR is taken.
var ErrCIDRFull = errors.New("cluster CIDR has no free podCIDR left")

// Allocator hands out fixed-size subnets (podCIDRs) of a cluster CIDR without overlap. It is safe for
// concurrent use.
type Allocator struct {
	cluster  netip.Prefix
	maskSize int
	count    int // number of subnets
	mu       sync.Mutex
	used     map[int]bool
	next     int // where the next search starts (round robin, like upstream's range allocator)
}

// NewAllocator returns an allocator of /maskSize subnets of cluster (e.g. "10.244.0.0/16", 24). The
// subnet must be at least as long as the cluster prefix and at most 16 bits longer (65536 subnets).
func NewAllocator(cluster string, maskSize int) (*Allocator, error) {
	p, err := netip.ParsePrefix(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", cluster, err)
	}
	p = p.Masked()
	bits := p.Addr().BitLen()
	if maskSize < p.Bits() || maskSize > bits {
		return nil, fmt.Errorf("node CIDR mask size %d: must be between the cluster prefix length %d and %d", maskSize, p.Bits(), bits)
	}
	if maskSize-p.Bits() > 16 {
		return nil, fmt.Errorf("node CIDR mask size %d: more than 65536 subnets of %s", maskSize, p)
	}
	return &Allocator{cluster: p, maskSize: maskSize, count: 1 << (maskSize - p.Bits()), used: map[int]bool{}}, nil
}

// subnet returns the i-th subnet.
func (a *Allocator) subnet(i int) netip.Prefix {
	base := new(big.Int).SetBytes(a.cluster.Addr().AsSlice())
	off := new(big.Int).Lsh(big.NewInt(int64(i)), uint(a.cluster.Addr().BitLen()-a.maskSize))
	b := new(big.Int).Add(base, off).FillBytes(make([]byte, len(a.cluster.Addr().AsSlice())))
	addr, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(addr, a.maskSize)
}

// index returns which subnet cidr is, or an error when it is not one of this allocator's subnets.
func (a *Allocator) index(cidr string) (int, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return 0, fmt.Errorf("podCIDR %q: %w", cidr, err)
	}
	if p.Bits() != a.maskSize || !a.cluster.Contains(p.Addr()) || p.Masked() != p {
		return 0, fmt.Errorf("podCIDR %s is not a /%d subnet of %s", p, a.maskSize, a.cluster)
	}
	base := new(big.Int).SetBytes(a.cluster.Addr().AsSlice())
	v := new(big.Int).SetBytes(p.Addr().AsSlice())
	v.Sub(v, base).Rsh(v, uint(a.cluster.Addr().BitLen()-a.maskSize))
	return int(v.Int64()), nil
}

// Occupy marks cidr as taken (a podCIDR a Node already has). It reports an error for a CIDR outside
// the cluster CIDR or of another size.
func (a *Allocator) Occupy(cidr string) error {
	i, err := a.index(cidr)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used[i] = true
	return nil
}

// Allocate returns a free subnet and marks it taken, or ErrCIDRFull.
func (a *Allocator) Allocate() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for n := 0; n < a.count; n++ {
		i := (a.next + n) % a.count
		if !a.used[i] {
			a.used[i] = true
			a.next = (i + 1) % a.count
			return a.subnet(i).String(), nil
		}
	}
	return "", ErrCIDRFull
}

// Release frees cidr; releasing a CIDR that is not this allocator's is a no-op.
func (a *Allocator) Release(cidr string) {
	i, err := a.index(cidr)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, i)
}
