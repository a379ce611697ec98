package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/runtime/containerd"
	framework "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestImportProgress imports one archive with a progress callback into an empty containerd, checks
// the reported bytes and that CRI sees the image pinned, re-imports it (idempotent), and checks a
// corrupt archive fails with an error naming the file.
func TestImportProgress(t *testing.T) {
	rt := framework.Start(t, framework.Options{SkipImport: true, NoNetwork: true})
	ctx := context.Background()
	file := filepath.Join(framework.ImagesDir(t), build.ArchiveName(bundled.DemoServerV2))
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	im, err := containerd.NewImporter(rt.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	for round := 0; round < 2; round++ {
		var reports []containerd.ImportProgress
		imgs, err := im.ImportFile(ctx, file, func(p containerd.ImportProgress) { reports = append(reports, p) })
		if err != nil {
			t.Fatal(err)
		}
		if len(imgs) != 1 || imgs[0].Name != bundled.DemoServerV2 || imgs[0].Digest != archiveDigest(t, bundled.DemoServerV2) {
			t.Errorf("round %d: imported %+v", round, imgs)
		}
		if len(reports) < 2 {
			t.Fatalf("round %d: %d progress reports for a %d-byte archive", round, len(reports), fi.Size())
		}
		for i, p := range reports {
			if p.File != file || p.Total != fi.Size() || (i > 0 && p.Done < reports[i-1].Done) {
				t.Errorf("round %d: report %d = %+v", round, i, p)
			}
		}
		if last := reports[len(reports)-1]; last.Done != fi.Size() {
			t.Errorf("round %d: last report %+v, want Done = %d", round, last, fi.Size())
		}
	}
	st, err := rt.CRI.Image().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: bundled.DemoServerV2}})
	if err != nil || st.Image == nil {
		t.Fatalf("ImageStatus after import: %v %v", st, err)
	}
	// containerd reports Image.pinned (from the io.cri-containerd.pinned label) since 1.7.
	if v := rt.Supervisor.Version(); (v.Major > 1 || v.Minor >= 7) && !st.Image.Pinned {
		t.Errorf("imported image is not pinned on containerd %s: %+v", v, st.Image)
	}
	list, err := rt.CRI.Image().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.Images) != 1 {
		t.Errorf("after two imports of one archive CRI lists %d images (%v)", len(list.GetImages()), err)
	}

	bad := filepath.Join(t.TempDir(), "bad.tar")
	os.WriteFile(bad, []byte("not a tar archive"), 0o644)
	if _, err := im.ImportFile(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), "import "+bad) {
		t.Errorf("importing a corrupt archive: %v", err)
	}
}
