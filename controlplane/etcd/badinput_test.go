package etcd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestoreBadSnapshots: restoring from a missing file, an empty file, a directory, garbage, a
// truncated or a corrupted snapshot fails with an error naming the problem (no panic) and leaves no data dir behind.
func TestRestoreBadSnapshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Config{DataDir: filepath.Join(dir, "etcd"), PKIDir: filepath.Join(dir, "pki"), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/registry/namespaces/default", `{}`); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	snap := filepath.Join(dir, "snap.db")
	if _, err := Save(ctx, s, snap); err != nil {
		t.Fatal(err)
	}
	s.Close()
	good, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]string{
		"missing":   filepath.Join(dir, "none.db"),
		"empty":     write("empty.db", nil),
		"directory": t.TempDir(),
		"garbage":   write("garbage.db", []byte(strings.Repeat("not a bolt file ", 2000))),
		"truncated": write("truncated.db", good[:len(good)-1000]),
		"corrupted": write("corrupted.db", flipByte(good, len(good)/2)),
		"zeroed":    write("zeroed.db", make([]byte, len(good))),
	}
	// A good snapshot whose restore fails part-way (the context ends) leaves no data dir either.
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := Restore(done, snap, filepath.Join(dir, "restore-cancelled")); err == nil {
		t.Errorf("restore with a cancelled context succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "restore-cancelled")); err == nil {
		t.Errorf("failed restore left data dir restore-cancelled")
	}
	for name, file := range cases {
		target := filepath.Join(dir, "restore-"+name)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: restore panicked: %v", name, r)
				}
			}()
			n, err := Restore(ctx, file, target)
			if err == nil {
				t.Errorf("%s: restored %d keys, want an error", name, n)
				return
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error spans lines: %q", name, err)
			}
			want := map[string]string{"missing": "no such file", "empty": "is empty", "directory": "is a directory",
				"garbage": "truncated or foreign", "zeroed": "integrity check", "truncated": "truncated or foreign", "corrupted": "integrity check"}[name]
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", name, err, want)
			}
		}()
		if _, err := os.Stat(target); err == nil {
			t.Errorf("%s: failed restore left data dir %s", name, target)
		}
	}
}

// flipByte returns a copy of b with the byte at i inverted.
func flipByte(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}
