package ipam

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func testRange(t *testing.T, cidr string) Range {
	_, sn, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	first := net.IP{sn.IP[0], sn.IP[1], sn.IP[2], sn.IP[3] + 1}
	ones, _ := sn.Mask.Size()
	last := net.IP{sn.IP[0], sn.IP[1], sn.IP[2], sn.IP[3] + byte(1<<(32-ones)) - 2}
	return Range{Subnet: *sn, Start: first, End: last, Gateway: first}
}

func TestAllocateReleaseExhaust(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, "net", []Range{testRange(t, "10.0.0.0/29")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := range 5 {
		a, err := s.Allocate(fmt.Sprint("c", i), "eth0", "")
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if a.IP.String() == "10.0.0.1" || got[a.IP.String()] {
			t.Fatalf("allocation %d got %s (gateway or duplicate)", i, a.IP)
		}
		got[a.IP.String()] = true
	}
	if _, err := s.Allocate("c5", "eth0", ""); !errors.Is(err, ErrExhausted) {
		t.Fatalf("6th allocation: %v, want ErrExhausted", err)
	}
	// Idempotent ADD returns the same address.
	a0, _, _ := s.Lookup("c0", "eth0")
	again, err := s.Allocate("c0", "eth0", "")
	if err != nil || !again.IP.Equal(a0.IP) {
		t.Fatalf("repeated Allocate = %v %v, want %s", again.IP, err, a0.IP)
	}
	// State persists across Open; release frees the address for someone else.
	s2, _ := Open(dir, "net", s.Ranges)
	if _, ok, err := s2.Release("c0", "eth0"); !ok || err != nil {
		t.Fatalf("Release: ok=%v err=%v", ok, err)
	}
	if _, ok, err := s2.Release("c0", "eth0"); ok || err != nil {
		t.Fatalf("second Release: ok=%v err=%v, want false nil", ok, err)
	}
	b, err := s2.Allocate("c6", "eth0", "")
	if err != nil || !b.IP.Equal(a0.IP) {
		t.Fatalf("after release got %v %v, want %s", b.IP, err, a0.IP)
	}
}

func TestConcurrentStores(t *testing.T) {
	dir := t.TempDir()
	r := []Range{testRange(t, "10.0.1.0/24")}
	var wg sync.WaitGroup
	ips := make([]string, 200)
	errs := make([]error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir, "net", r) // a store per "process"
			if err == nil {
				var a Allocation
				a, err = s.Allocate(fmt.Sprint("c", i), "eth0", "")
				ips[i] = a.IP.String()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, ip := range ips {
		if errs[i] != nil {
			t.Fatalf("allocation %d: %v", i, errs[i])
		}
		if seen[ip] {
			t.Fatalf("duplicate %s", ip)
		}
		seen[ip] = true
	}
}

func TestGC(t *testing.T) {
	s, err := Open(t.TempDir(), "net", []Range{testRange(t, "10.0.2.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Allocate(id, "eth0", ""); err != nil {
			t.Fatal(err)
		}
	}
	freed, err := s.GC(func(id, ifName string) bool { return id == "b" && ifName == "eth0" })
	if err != nil || len(freed) != 2 {
		t.Fatalf("GC freed %v (%v), want a and c", freed, err)
	}
	all, _ := s.List()
	if len(all) != 1 || all[0].ContainerID != "b" {
		t.Fatalf("left %+v, want only b", all)
	}
}

func TestOpenRejectsBadNetworkName(t *testing.T) {
	for _, n := range []string{"", "..", "a/b"} {
		if _, err := Open(t.TempDir(), n, nil); err == nil {
			t.Errorf("Open(%q) succeeded", n)
		}
	}
}

func TestAllocated(t *testing.T) {
	dir := t.TempDir()
	if n, err := Allocated(dir, "net"); err != nil || n != 0 {
		t.Fatalf("Allocated(no store) = %d, %v; want 0, nil", n, err)
	}
	s, err := Open(dir, "net", []Range{testRange(t, "10.0.0.0/29")})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Allocate(id, "eth0", ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := Allocated(dir, "net"); err != nil || n != 2 {
		t.Fatalf("Allocated after 2 allocations = %d, %v; want 2", n, err)
	}
	if _, _, err := s.Release("a", "eth0"); err != nil {
		t.Fatal(err)
	}
	if n, _ := Allocated(dir, "net"); n != 1 {
		t.Fatalf("Allocated after a release = %d, want 1", n)
	}
	if Dir(dir, "net") != filepath.Join(dir, "net") {
		t.Fatalf("Dir = %s", Dir(dir, "net"))
	}
}

// TestReservationRecord: a reservation is the single file ips/<ip> holding the whole record (container
// ID, interface, netns), nothing else is left in ips/, and a record of an earlier version (two lines,
// with an attachments/ index beside it) still reads, releases and frees its address.
func TestReservationRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, "net", []Range{testRange(t, "10.0.3.0/29")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Allocate("c1", "eth0", "/var/run/netns/cni-1")
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "net", "ips"))
	if len(ents) != 1 || ents[0].Name() != a.IP.String() {
		t.Fatalf("ips/ holds %v, want only %s", ents, a.IP)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "net", "ips", a.IP.String()))
	if string(b) != "c1\neth0\n/var/run/netns/cni-1\n" {
		t.Fatalf("record %q", b)
	}
	if got, ok, err := s.Lookup("c1", "eth0"); !ok || err != nil || got.NetNS != "/var/run/netns/cni-1" || !got.IP.Equal(a.IP) {
		t.Fatalf("Lookup = %+v %v %v", got, ok, err)
	}
	// An earlier version's store: a two-line record and its index; a crash's temporary record.
	legacy := filepath.Join(dir, "old")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(legacy, "net", "ips"), 0o700))
	must(os.MkdirAll(filepath.Join(legacy, "net", "attachments"), 0o700))
	must(os.WriteFile(filepath.Join(legacy, "net", "ips", "10.0.3.2"), []byte("old\neth0\n"), 0o600))
	must(os.WriteFile(filepath.Join(legacy, "net", "attachments", "0123"), []byte("10.0.3.2\n"), 0o600))
	must(os.WriteFile(filepath.Join(legacy, "net", "ips", ".reserve-123"), []byte("half"), 0o600))
	old, err := Open(legacy, "net", s.Ranges)
	must(err)
	if _, err := os.Stat(filepath.Join(legacy, "net", "attachments")); !os.IsNotExist(err) {
		t.Errorf("attachments/ index kept: %v", err)
	}
	if got, ok, err := old.Lookup("old", "eth0"); !ok || err != nil || got.IP.String() != "10.0.3.2" || got.NetNS != "" {
		t.Fatalf("legacy Lookup = %+v %v %v", got, ok, err)
	}
	n, err := old.Allocate("new", "eth0", "")
	must(err)
	if n.IP.String() == "10.0.3.2" {
		t.Fatalf("new allocation took the legacy record's address")
	}
	if _, err := os.Stat(filepath.Join(legacy, "net", "ips", ".reserve-123")); !os.IsNotExist(err) {
		t.Errorf("a crash's temporary record survived an allocation: %v", err)
	}
	if _, ok, err := old.Release("old", "eth0"); !ok || err != nil {
		t.Fatalf("legacy Release = %v %v", ok, err)
	}
	if _, err := s.Allocate("bad\nid", "eth0", ""); err == nil {
		t.Error("a container ID with a newline was recorded")
	}
}
