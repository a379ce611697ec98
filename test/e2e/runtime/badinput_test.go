package runtime

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/runtime/containerd"
	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// rewriteArchive copies the OCI archive src to dst, dropping the entries for which drop returns true.
func rewriteArchive(t *testing.T, src, dst string, drop func(name string, size int64) bool) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if drop(h.Name, h.Size) {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// manifestDigest reads the manifest digest from an OCI archive's index.json.
func manifestDigest(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no index.json in %s: %v", archive, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct{ Digest string } `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&idx); err != nil || len(idx.Manifests) == 0 {
			t.Fatalf("index.json: %v %+v", err, idx)
		}
		return idx.Manifests[0].Digest
	}
}

// TestImportBadArchives: a truncated archive, a non-archive file, an archive missing its layer blob and
// one missing its manifest blob each fail with an error naming the file, and leave no image that CRI
// lists (a half-imported image would be listed but could never start a container).
func TestImportBadArchives(t *testing.T) {
	rt := framework.Start(t, framework.Options{SkipImport: true, NoNetwork: true})
	ctx := context.Background()
	// Each broken archive comes from a different image: blobs a failed import wrote stay in the content
	// store (unreferenced, until containerd's GC), and would fill in a blob another archive lacks.
	good := filepath.Join(framework.ImagesDir(t), build.ArchiveName(bundled.DemoServerV2))
	other := filepath.Join(framework.ImagesDir(t), build.ArchiveName(bundled.DemoServerV1))
	pause := filepath.Join(framework.ImagesDir(t), build.ArchiveName(bundled.Pause))
	im, err := containerd.NewImporter(rt.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	dir := t.TempDir()
	data, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.tar")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	notArchive := filepath.Join(dir, "text.tar")
	if err := os.WriteFile(notArchive, bytes.Repeat([]byte("not an archive\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := strings.TrimPrefix(manifestDigest(t, good), "sha256:")
	noLayer := filepath.Join(dir, "nolayer.tar")
	rewriteArchive(t, pause, noLayer, func(name string, size int64) bool {
		return strings.HasPrefix(name, "blobs/") && size > 100000 // the layer; manifest and config are small
	})
	noManifest := filepath.Join(dir, "nomanifest.tar")
	rewriteArchive(t, good, noManifest, func(name string, _ int64) bool { return name == "blobs/sha256/"+manifest })
	for _, f := range []string{noManifest, truncated, notArchive, noLayer} {
		_, err := im.ImportFile(ctx, f, nil)
		if err == nil {
			t.Errorf("importing %s succeeded", filepath.Base(f))
		} else if !strings.Contains(err.Error(), f) || strings.Contains(err.Error(), "\n") {
			t.Errorf("importing %s: error %q does not name the file on one line", filepath.Base(f), err)
		}
		// CRI's image cache follows containerd's image events, so a rolled-back record may show briefly.
		var list *runtimeapi.ListImagesResponse
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if list, err = rt.CRI.Image().ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
				t.Fatal(err)
			}
			if len(list.Images) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(list.Images) != 0 {
			t.Errorf("failed import of %s left images: %v", filepath.Base(f), list.Images)
		}
	}
	// The good archive still imports afterwards.
	if _, err := im.ImportFile(ctx, good, nil); err != nil {
		t.Fatalf("good archive after bad ones: %v", err)
	}
}
