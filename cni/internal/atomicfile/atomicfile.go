// Package atomicfile replaces files so that readers (a runtime loading a conflist, exec'ing a plugin) see
// either the old or the new content, never a partial file.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write copies r into a temporary file in path's directory (named "."+base+".tmp-*", which CNI config
// loaders ignore), fsyncs it, sets perm and renames it over path. The directory must exist. On error the
// temporary file is removed and path is unchanged.
func Write(path string, r io.Reader, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
