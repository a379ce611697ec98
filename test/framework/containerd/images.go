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
	"github.com/nodekit/nodekit/images/bundled"
)

var (
	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
	// imagesLock is the cache's lock file, held shared for the life of the test binary once the cache
	// is complete, so another binary's pruneImageCaches never removes a cache in use.
	imagesLock *os.File
)

// EnvImages names a directory of prebuilt OCI archives of the bundled images (what `make images` writes
// to _output/images). When set, BuildImages returns it as it is and builds nothing: a test binary built
// with `go test -c` then runs where there is no Go toolchain (the guests of `make vm-test`).
const EnvImages = "NODEKIT_TEST_IMAGES"

// BuildImages returns a directory holding the OCI archives of every bundled image (bundled.All), built
// from this source tree at most once per test binary ($NODEKIT_TEST_IMAGES instead when set, see EnvImages). Archives are cached in
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
	if dir := os.Getenv(EnvImages); dir != "" {
		for _, ref := range bundled.All {
			if _, err := os.Stat(filepath.Join(dir, build.ArchiveName(ref))); err != nil {
				return "", fmt.Errorf("%s=%s: not a directory of the bundled images' archives: %w", EnvImages, dir, err)
			}
		}
		return dir, nil
	}
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
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	flock := func(how int) error {
		if err := unix.Flock(int(lock.Fd()), how); err != nil {
			lock.Close()
			return fmt.Errorf("locking %s: %w", lock.Name(), err)
		}
		return nil
	}
	// In use: shared. Building: exclusive (another binary waits; pruning skips a held lock).
	if err := flock(unix.LOCK_SH); err != nil {
		return "", err
	}
	if _, err := os.Stat(done); err == nil {
		imagesLock = lock
		return dir, nil
	}
	if err := flock(unix.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(done); err != nil { // not built by another test binary while we waited
		os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := build.Build(ctx, build.Options{ModuleDir: mod, OutDir: dir, Go: goCmd}); err != nil {
			os.RemoveAll(dir)
			lock.Close()
			return "", err
		}
		pruneImageCaches(dir)
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			lock.Close()
			return "", err
		}
	}
	if err := flock(unix.LOCK_SH); err != nil {
		return "", err
	}
	imagesLock = lock
	return dir, nil
}

// pruneImageCaches removes archive caches other than keep that are over an hour old and neither being
// built nor in use (their lock file is free: every test binary using a cache holds it shared), so
// source changes do not pile up caches in $TMPDIR.
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
