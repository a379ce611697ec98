package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File is one file of a projected volume: content and permission bits.
type File struct {
	Data []byte
	Mode os.FileMode
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// writeAtomic makes dir hold exactly payload (relative path → file) such that a reader never sees a
// mix of old and new files, as upstream's AtomicWriter does: the files are written into a fresh
// timestamped directory "..<timestamp>", the symlink "..data" is swapped to it with a rename, and each
// top-level name in dir is a symlink into "..data". Unchanged payloads write nothing. Payload paths must
// be relative, without "..", and not start with "..". A non-nil gid is the pod's fsGroup: the volume's
// files and directories then belong to that group, files with at least mode 0440 (setOwnership, before
// the new files become visible, as upstream's AtomicWriter runs SetVolumeOwnership).
func writeAtomic(dir string, payload map[string]File, gid *int64) error {
	for p := range payload {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "..") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
			return fmt.Errorf("volume file path %q must be relative and must not contain '..'", p)
		}
	}
	if gid != nil {
		grouped := make(map[string]File, len(payload))
		for p, f := range payload {
			grouped[p] = File{Data: f.Data, Mode: groupMode(f.Mode, true)}
		}
		payload = grouped
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if oldTS != "" && sameContent(filepath.Join(dir, oldTS), payload, gid) {
		return nil
	}
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, f.Mode); err != nil {
			return err
		}
		if err := os.Chmod(full, f.Mode); err != nil {
			return err
		}
	}
	if gid != nil {
		if err := setOwnership(dir, *gid, true); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return err
	}
	top := map[string]bool{}
	for p := range payload {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") {
			if n != dataDirName && n != filepath.Base(tsDir) {
				_ = os.RemoveAll(filepath.Join(dir, n))
			}
			continue
		}
		if !top[n] {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	return nil
}

// sameContent reports whether dir holds exactly payload, its files in group gid when gid is set.
func sameContent(dir string, payload map[string]File, gid *int64) bool {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f, ok := payload[rel]
		if !ok {
			return errors.New("extra")
		}
		st, err := d.Info()
		if err != nil || st.Mode().Perm() != f.Mode.Perm() || !hasGroup(st, gid) {
			return errors.New("mode")
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errors.New("data")
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}
