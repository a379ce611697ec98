package etcd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Save writes a consistent snapshot of the store's keyspace (etcd's Maintenance.Snapshot, what
// `etcdctl snapshot save` does) to path, through a temporary file renamed into place. It returns the
// snapshot's size in bytes.
func Save(ctx context.Context, s *Store, path string) (int64, error) {
	cli, err := s.Client()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer os.Remove(tmp)
	n, err := io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("etcd snapshot: write %s: %w", path, err)
	}
	if _, err := liveKeys(tmp); err != nil {
		return 0, fmt.Errorf("etcd snapshot: written file does not read back: %w", err)
	}
	return n, os.Rename(tmp, path)
}

// Restore creates a fresh embedded etcd data dir at dataDir holding the keys and values live in the
// snapshot file. dataDir must not exist or be empty. Unlike `etcdutl snapshot restore`, which keeps the
// snapshot's revisions, the keys are written anew, so revisions (resourceVersions) restart low: clients
// must relist, as Kubernetes requires after any etcd restore. It returns the number of keys restored.
func Restore(ctx context.Context, snapshot, dataDir string) (n int, err error) {
	entries, statErr := os.ReadDir(dataDir)
	if statErr == nil && len(entries) > 0 {
		return 0, fmt.Errorf("etcd restore: data dir %s is not empty", dataDir)
	}
	// A failed restore leaves dataDir as it found it (absent, or empty), so it can simply be retried.
	defer func() {
		if err == nil {
			return
		}
		if statErr != nil {
			os.RemoveAll(dataDir)
			return
		}
		left, _ := os.ReadDir(dataDir)
		for _, e := range left {
			os.RemoveAll(filepath.Join(dataDir, e.Name()))
		}
	}()
	kvs, err := liveKeys(snapshot)
	if err != nil {
		return 0, fmt.Errorf("etcd restore: %w", err)
	}
	// The member that writes the keys lives only for the restore; its throwaway certificates too.
	pkiDir, err := os.MkdirTemp("", "nodekit-etcd-restore-")
	if err != nil {
		return 0, fmt.Errorf("etcd restore: %w", err)
	}
	defer os.RemoveAll(pkiDir)
	s, err := Start(ctx, Config{DataDir: dataDir, PKIDir: pkiDir, ClientAddr: "127.0.0.1:0"})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	cli, err := s.Client()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	const batch = 100
	for i := 0; i < len(kvs); i += batch {
		var ops []clientv3.Op
		for _, kv := range kvs[i:min(i+batch, len(kvs))] {
			ops = append(ops, clientv3.OpPut(string(kv.Key), string(kv.Value)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return 0, fmt.Errorf("etcd restore: write keys: %w", err)
		}
	}
	return len(kvs), nil
}

// liveKeys reads an etcd backend file (a snapshot) and returns the latest value of every key not
// deleted, in key order. The "key" bucket maps revisions (8-byte main, '_', 8-byte sub, and a trailing
// 't' for tombstones) to mvccpb.KeyValue.
func liveKeys(path string) ([]*mvccpb.KeyValue, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory, not an etcd snapshot file", path)
	case fi.Size() == 0: // bbolt would try to initialise it as a new database
		return nil, fmt.Errorf("%s is empty, not an etcd snapshot", path)
	}
	if err := verifyChecksum(path, fi.Size()); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	defer db.Close()
	latest := map[string]*mvccpb.KeyValue{}
	var order []string
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("not an etcd snapshot: no key bucket")
		}
		return b.ForEach(func(rev, v []byte) error {
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, kv); err != nil {
				return fmt.Errorf("revision %x: %w", rev, err)
			}
			k := string(kv.Key)
			if _, seen := latest[k]; !seen {
				order = append(order, k)
			}
			if len(rev) == 18 && rev[17] == 't' {
				latest[k] = nil
				return nil
			}
			latest[k] = kv
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var out []*mvccpb.KeyValue
	for _, k := range order {
		if kv := latest[k]; kv != nil {
			out = append(out, kv)
		}
	}
	slices.SortFunc(out, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return out, nil
}

// verifyChecksum checks a snapshot file's integrity the way etcdutl does: etcd's Snapshot API streams the
// bbolt file (a whole number of 512-byte sectors) followed by the sha256 of what precedes it. A file
// that is sector-aligned carries no checksum (a copied member db) and is left to bbolt's own checks;
// any other size means a truncated or foreign file, and a wrong sum a corrupted one.
func verifyChecksum(path string, size int64) error {
	switch size % 512 {
	case 0:
		return nil
	case sha256.Size:
	default:
		return fmt.Errorf("%s is not an etcd snapshot (size %d is not a bbolt file plus its sha256): truncated or foreign", filepath.Base(path), size)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%s failed its sha256 integrity check: the snapshot is corrupted", filepath.Base(path))
	}
	return nil
}
