package etcd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestSnapshotSaveRestore saves a snapshot of a real embedded member, restores it into a fresh data dir
// and reads the live keys back (deleted and overwritten keys included correctly).
func TestSnapshotSaveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Config{DataDir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < 50; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/default/p%02d", i), fmt.Sprintf(`{"v":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, "/registry/pods/default/p00", `{"v":"new"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "/registry/pods/default/p49"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snap.db")
	if n, err := Save(ctx, s, snap); err != nil || n == 0 {
		t.Fatalf("save: %d %v", n, err)
	}
	restored := filepath.Join(dir, "restored")
	n, err := Restore(ctx, snap, restored)
	if err != nil || n != 49 {
		t.Fatalf("restore: %d keys, %v", n, err)
	}
	if _, err := Restore(ctx, snap, restored); err == nil {
		t.Fatal("restore into a non-empty data dir must fail")
	}
	r, err := Start(ctx, Config{DataDir: restored, ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc, err := r.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	resp, err := rc.Get(ctx, "/registry/pods/default/p00")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != `{"v":"new"}` {
		t.Fatalf("p00 after restore: %v %v", err, resp)
	}
	resp, err = rc.Get(ctx, "/registry/pods/default/p49")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("deleted key came back: %v %v", err, resp.Kvs)
	}
	resp, err = rc.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 49 {
		t.Fatalf("restored count: %v %d", err, resp.Count)
	}
}
