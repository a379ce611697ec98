package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/images/build"
)

var (
	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
)

// BuildImages returns a directory holding the OCI archives of every bundled image (bundled.All), built
// from this source tree at most once per test binary. Archives are cached in
// $TMPDIR/nodekit-images-<source hash> (hash of images/, go.mod, go.sum, Go version, arch — see
// build.SourceHash), so later test binaries and runs reuse them; concurrent test binaries serialize on a
// lock file next to the cache and the first one builds. A cold build takes about 30 s.
func BuildImages() (string, error) {
	imagesOnce.Do(func() { imagesDir, imagesErr = buildImages() })
	return imagesDir, imagesErr
}

// ImagesDir is BuildImages failing t on error.
func ImagesDir(t testing.TB) string {
	t.Helper()
	dir, err := BuildImages()
	if err != nil {
		t.Fatalf("building bundled images: %v", err)
	}
	return dir
}

func buildImages() (string, error) {
	mod, err := build.FindModuleDir(".")
	if err != nil {
		return "", err
	}
	goCmd, err := build.GoCommand()
	if err != nil {
		return "", err
	}
	hash, err := build.SourceHash(mod, goCmd, runtime.GOARCH)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "nodekit-images-"+hash[:16])
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return dir, nil // built by another test binary while we waited
	}
	os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := build.Build(ctx, build.Options{ModuleDir: mod, OutDir: dir, Go: goCmd}); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	pruneImageCaches(dir)
	return dir, os.WriteFile(done, nil, 0o644)
}

// pruneImageCaches removes archive caches other than keep that are over an hour old and not being
// built (their lock file is free), so source changes do not pile up caches in $TMPDIR.
func pruneImageCaches(keep string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "nodekit-images-*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if d == keep || err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < time.Hour {
			continue
		}
		lock, err := os.OpenFile(d+".lock", os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			continue
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(d)
			os.Remove(d + ".lock")
		}
		lock.Close()
	}
}
