package components

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartedCountsRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "components")
	now := time.Now()
	r, err := Started(dir, Scheduler, 100, now, []string{"nodekit", "server"}, "/var/log/x.log")
	if err != nil || r.Restarts != 0 {
		t.Fatalf("first start: %+v, %v", r, err)
	}
	if r, _ = Started(dir, Scheduler, 100, now, nil, ""); r.Restarts != 0 {
		t.Errorf("same PID again: restarts %d, want 0", r.Restarts)
	}
	if r, _ = Started(dir, Scheduler, 101, now, nil, "/l"); r.Restarts != 1 {
		t.Errorf("new PID: restarts %d, want 1", r.Restarts)
	}
	recs, errs := Read(dir)
	if len(errs) > 0 || len(recs) != 1 || recs[0].PID != 101 || recs[0].Restarts != 1 || recs[0].LogFile != "/l" {
		t.Fatalf("Read = %+v, %v", recs, errs)
	}
	if _, err := Started(dir, "../etc", 1, now, nil, ""); err == nil {
		t.Error("a name with a path was accepted")
	}
	if err := Remove(dir, Scheduler); err != nil {
		t.Fatal(err)
	}
	if recs, _ := Read(dir); len(recs) != 0 {
		t.Errorf("after Remove: %+v", recs)
	}
}

func TestReadRefusesUntrusted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "components")
	if _, err := Started(dir, APIServer, os.Getpid(), time.Now(), nil, "/a.log"); err != nil {
		t.Fatal(err)
	}
	if _, err := Started(dir, Etcd, os.Getpid(), time.Now(), nil, "/b.log"); err != nil {
		t.Fatal(err)
	}
	// A group-writable record file is refused, the others still read.
	if err := os.Chmod(path(dir, Etcd), 0o664); err != nil {
		t.Fatal(err)
	}
	recs, errs := Read(dir)
	if len(recs) != 1 || recs[0].Name != APIServer || len(errs) != 1 || !strings.Contains(errs[0].Error(), "writable by group or others") {
		t.Errorf("group-writable file: %+v, %v", recs, errs)
	}
	// A record whose name is not its file's.
	os.WriteFile(filepath.Join(dir, "kube-proxy.json"), []byte(`{"name":"etcd","pid":1}`), 0o600)
	if _, errs := Read(dir); len(errs) != 2 || !strings.Contains(errs[1].Error(), "does not match the file name") {
		t.Errorf("mismatched name: %v", errs)
	}
	// A world-writable directory: nothing is read from it.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if recs, errs := Read(dir); len(recs) != 0 || len(errs) != 1 {
		t.Errorf("world-writable dir: %+v, %v", recs, errs)
	}
	if recs, errs := Read(filepath.Join(dir, "missing")); recs != nil || errs != nil {
		t.Errorf("missing dir: %+v, %v", recs, errs)
	}
}

func TestAlive(t *testing.T) {
	if !(Record{PID: os.Getpid()}).Alive() {
		t.Error("this process is not alive")
	}
	if (Record{PID: 1 << 30}).Alive() {
		t.Error("a PID beyond pid_max is alive")
	}
}
