package build

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodekit/nodekit/images/bundled"
)

// TestBuildReproducible builds every image twice into separate directories and expects byte-identical
// archives (hence equal digests), distinct v1/v2 demo images, and the annotations containerd's import
// reads.
func TestBuildReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the images twice")
	}
	ctx := context.Background()
	a, err := Build(ctx, Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(ctx, Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(bundled.All) || len(b) != len(a) {
		t.Fatalf("built %d and %d images, want %d", len(a), len(b), len(bundled.All))
	}
	digests := map[string]string{}
	for i := range a {
		if a[i].Ref != bundled.All[i] || a[i].Digest != b[i].Digest {
			t.Errorf("%s: digests %s and %s differ between builds", a[i].Ref, a[i].Digest, b[i].Digest)
		}
		da, _ := os.ReadFile(a[i].File)
		db, _ := os.ReadFile(b[i].File)
		if !bytes.Equal(da, db) {
			t.Errorf("%s: archives %s and %s differ", a[i].Ref, a[i].File, b[i].File)
		}
		digests[a[i].Ref] = a[i].Digest
		checkArchive(t, a[i], da)
	}
	if digests[bundled.DemoServerV1] == digests[bundled.DemoServerV2] {
		t.Errorf("demo-server v1 and v2 have the same digest %s", digests[bundled.DemoServerV1])
	}
}

// checkArchive reads the OCI layout tar and checks index.json and the layer's files.
func checkArchive(t *testing.T, r Result, data []byte) {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", r.File, err)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: entry %s has time %v uid %d gid %d", r.File, h.Name, h.ModTime, h.Uid, h.Gid)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	if string(files["oci-layout"]) == "" {
		t.Errorf("%s: no oci-layout file", r.File)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("%s: index.json: %v", r.File, err)
	}
	if len(idx.Manifests) != 1 {
		t.Fatalf("%s: index has %d manifests", r.File, len(idx.Manifests))
	}
	m := idx.Manifests[0]
	if m.Digest.String() != r.Digest || m.Annotations[AnnotationContainerdName] != r.Ref || m.Annotations[AnnotationRefName] != r.Ref {
		t.Errorf("%s: index entry %s %v, want digest %s and ref %s", r.File, m.Digest, m.Annotations, r.Digest, r.Ref)
	}
	var man v1.Manifest
	if err := json.Unmarshal(files["blobs/sha256/"+m.Digest.Hex], &man); err != nil {
		t.Fatalf("%s: manifest: %v", r.File, err)
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(files["blobs/sha256/"+man.Config.Digest.Hex], &cfg); err != nil {
		t.Fatalf("%s: config: %v", r.File, err)
	}
	if cfg.OS != "linux" || len(cfg.Config.Entrypoint) != 1 {
		t.Errorf("%s: config os %q entrypoint %v", r.File, cfg.OS, cfg.Config.Entrypoint)
	}
	layerBlob := files["blobs/sha256/"+man.Layers[0].Digest.Hex]
	layer, err := tarball.LayerFromReader(bytes.NewReader(layerBlob))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	ltr := tar.NewReader(rc)
	for {
		h, err := ltr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s layer: %v", r.File, err)
		}
		entries[h.Name] = h
	}
	bin := entries[cfg.Config.Entrypoint[0][1:]]
	if bin == nil || bin.Mode != 0o755 || bin.Size < 100_000 {
		t.Errorf("%s: entrypoint %s in layer: %+v", r.File, cfg.Config.Entrypoint[0], bin)
	}
	if r.Ref == bundled.DemoServerV1 || r.Ref == bundled.DemoServerV2 {
		if sh := entries["bin/sh"]; sh == nil || sh.Typeflag != tar.TypeSymlink || sh.Linkname != "/demo-server" {
			t.Errorf("%s: bin/sh is %+v, want a symlink to /demo-server", r.File, sh)
		}
		if tmp := entries["tmp/"]; tmp == nil || tmp.Mode != 0o1777 {
			t.Errorf("%s: tmp/ is %+v, want mode 1777", r.File, tmp)
		}
	}
}

// TestCoreDNSVersion: the coredns image's tag is the CoreDNS module version images/coredns/go.mod
// requires, and its Spec builds in that module.
func TestCoreDNSVersion(t *testing.T) {
	dir, err := FindModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "images", "coredns", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/coredns/coredns " + bundled.CoreDNSVersion
	if !bytes.Contains(gomod, []byte("require "+want+"\n")) && !bytes.Contains(gomod, []byte("\t"+want+"\n")) {
		t.Errorf("images/coredns/go.mod does not require %s:\n%s", want, gomod)
	}
	var found bool
	for _, s := range Specs {
		if s.Ref == bundled.CoreDNS {
			found = true
			if s.Module != "images/coredns" || sourceOf(s) != ModulePath+"/images/coredns" {
				t.Errorf("coredns spec: module %q, source %q", s.Module, sourceOf(s))
			}
		}
	}
	if !found {
		t.Errorf("no Spec builds %s", bundled.CoreDNS)
	}
}

func TestArchiveName(t *testing.T) {
	if got := ArchiveName(bundled.Pause); got != "pause-3.10.tar" {
		t.Errorf("ArchiveName(pause) = %q", got)
	}
	if got := ArchiveName(bundled.DemoServerV2); got != "demo-server-v2.tar" {
		t.Errorf("ArchiveName(demo v2) = %q", got)
	}
	if _, err := FindModuleDir("/"); err == nil {
		t.Error("FindModuleDir(/) found a module")
	}
	dir, err := FindModuleDir(".")
	if err != nil || filepath.Base(filepath.Join(dir, "images", "build")) != "build" {
		t.Errorf("FindModuleDir(.) = %q, %v", dir, err)
	}
}

func TestEnsureLeavesArchivesAndMissingSources(t *testing.T) {
	dir := t.TempDir()
	have := filepath.Join(dir, "pause-3.10.tar")
	if err := os.WriteFile(have, []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(context.Background(), dir, nil); err != nil {
		t.Fatalf("Ensure with an archive present: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Fatalf("Ensure with an archive present wrote %v", m)
	}
	// No archive and no source tree from the working directory: nothing to build, not an error.
	empty := t.TempDir()
	t.Chdir(t.TempDir())
	if err := Ensure(context.Background(), empty, nil); err != nil {
		t.Fatalf("Ensure without sources: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(empty, "*")); len(m) != 0 {
		t.Fatalf("Ensure without sources wrote %v", m)
	}
}
