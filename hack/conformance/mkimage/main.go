// Command mkimage packs a root filesystem directory into one OCI image archive per reference, the
// format nodekit's agent imports from its --images-dir at start (images/build.WriteArchive: an OCI
// layout tar whose index names the image). hack/conformance/run.sh uses it for the conformance test
// images it builds from source (agnhost, busybox, pause) under the names the upstream suite expects.
//
//	mkimage --rootfs DIR --out DIR --ref registry.k8s.io/e2e-test-images/busybox:1.37.0-2 \
//	    [--ref ...] [--entrypoint /bin/sh] [--cmd ARG ...] [--env K=V ...] [--user UID] [--workdir DIR] [--source TEXT]
//
// The layer holds every file, directory and symlink under --rootfs, sorted, owned by 0:0, timestamped
// at the Unix epoch, so the same tree gives the same digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nodekit/nodekit/images/build"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// epoch is the timestamp of every layer entry (images/build's too).
var epoch = time.Unix(0, 0).UTC()

func main() {
	var refs, entrypoint, cmd, env list
	rootfs := flag.String("rootfs", "", "root filesystem directory of the image's single layer")
	out := flag.String("out", "", "directory receiving one archive per --ref (build.ArchiveName)")
	source := flag.String("source", "", "what the image is built from (org.opencontainers.image.source label)")
	flag.Var(&refs, "ref", "image reference (repeatable)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable)")
	flag.Var(&cmd, "cmd", "cmd argument (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE of the image config (repeatable)")
	user := flag.String("user", "", "user of the image config (e.g. 1234; default root)")
	workdir := flag.String("workdir", "", "working directory of the image config (default /)")
	flag.Parse()
	c := build.ImageConfig{Arch: runtime.GOARCH, Entrypoint: entrypoint, Cmd: cmd, Env: env, User: *user, WorkingDir: *workdir}
	if err := run(*rootfs, *out, *source, refs, c); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// run packs rootfs into one archive per ref under out, with c as the image config (its Labels and
// CreatedBy are set from source).
func run(rootfs, out, source string, refs []string, c build.ImageConfig) error {
	if rootfs == "" || out == "" || len(refs) == 0 {
		return fmt.Errorf("--rootfs, --out and at least one --ref are required")
	}
	layerTar, err := tarTree(rootfs)
	if err != nil {
		return fmt.Errorf("layer of %s: %w", rootfs, err)
	}
	var labels map[string]string
	if source != "" {
		labels = map[string]string{"org.opencontainers.image.source": source}
	}
	c.Labels, c.CreatedBy = labels, "hack/conformance/mkimage "+source
	img, err := build.FromLayer(layerTar, c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, ref := range refs {
		scratch, err := os.MkdirTemp(out, ".layout-")
		if err != nil {
			return err
		}
		file := filepath.Join(out, strings.ReplaceAll(strings.ReplaceAll(ref, "/", "_"), ":", "-")+".tar")
		digest, err := build.WriteArchive(img, ref, file, filepath.Join(scratch, "layout"))
		os.RemoveAll(scratch)
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		fmt.Printf("%s %s %s\n", ref, digest, file)
	}
	return nil
}

// tarTree returns the uncompressed tar of dir's tree: regular files, directories and symlinks with
// their modes (with the setuid, setgid and sticky bits), sorted by path, owned by 0:0, at the Unix epoch. Other file types are an error.
func tarTree(dir string) ([]byte, error) {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
		for bit, m := range map[fs.FileMode]int64{fs.ModeSticky: 0o1000, fs.ModeSetgid: 0o2000, fs.ModeSetuid: 0o4000} {
			if fi.Mode()&bit != 0 {
				hdr.Mode |= m
			}
		}
		var data []byte
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return nil, err
			}
		case fi.Mode().IsRegular():
			if data, err = os.ReadFile(p); err != nil {
				return nil, err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		default:
			return nil, fmt.Errorf("%s: unsupported file type %v", p, fi.Mode().Type())
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
