package allocator

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodekit/nodekit/controlplane/etcd"
)

func TestRangesAndRepair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcd.Start(ctx, etcd.Config{DataDir: filepath.Join(t.TempDir(), "etcd"), PKIDir: filepath.Join(t.TempDir(), "pki"), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, cidr, _ := net.ParseCIDR("10.96.0.0/29") // 6 usable: .1-.6
	ips, err := NewServiceIPs(cli, cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := ips.AllocateSpecific(ctx, "10.96.0.1", "default/kubernetes"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 5; i++ {
		v, err := ips.Allocate(ctx, "ns/s")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if got[0] != "10.96.0.2" || got[4] != "10.96.0.6" {
		t.Fatalf("allocated %v", got)
	}
	if _, err := ips.Allocate(ctx, "ns/full"); !errors.Is(err, ErrFull) {
		t.Fatalf("full range: %v", err)
	}
	var nir *ErrNotInRange
	if err := ips.AllocateSpecific(ctx, "10.96.0.7", "x"); !errors.As(err, &nir) {
		t.Fatalf("broadcast address: %v", err)
	}
	if err := ips.AllocateSpecific(ctx, "10.96.0.2", "other/owner"); !errors.Is(err, ErrAllocated) {
		t.Fatalf("taken: %v", err)
	}
	// Repair: .1-.3 in use; .4-.6 leaked. Pass 1 only suspects; .5 is re-allocated in between (a create
	// in flight), so pass 2 releases .4 and .6 only.
	inUse := map[string]bool{"10.96.0.1": true, "10.96.0.2": true, "10.96.0.3": true}
	sus, rel, err := ips.Repair(ctx, inUse, nil)
	if err != nil || len(rel) != 0 || len(sus) != 3 {
		t.Fatalf("pass 1: %v released=%v suspects=%v", err, rel, sus)
	}
	if err := ips.Release(ctx, "10.96.0.5"); err != nil {
		t.Fatal(err)
	}
	if err := ips.AllocateSpecific(ctx, "10.96.0.5", "ns/new"); err != nil {
		t.Fatal(err)
	}
	_, rel, err = ips.Repair(ctx, inUse, sus)
	if err != nil || len(rel) != 2 || rel[0] != "10.96.0.4" || rel[1] != "10.96.0.6" {
		t.Fatalf("pass 2 released %v (%v)", rel, err)
	}

	ports := NewNodePorts(cli, 30000, 3)
	if err := ports.AllocateSpecific(ctx, "30003", "x"); !errors.As(err, &nir) {
		t.Fatalf("port outside range: %v", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := ports.Allocate(ctx, "ns/s"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ports.Allocate(ctx, "ns/s"); !errors.Is(err, ErrFull) {
		t.Fatalf("full port range: %v", err)
	}
}
