package containerd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// Namespace is the containerd namespace the CRI plugin keeps Kubernetes images and containers in.
const Namespace = "k8s.io"

// CRI labels set on imported images, as containerd's CRI plugin sets them on pulled ones (k3s does the
// same for airgap images): "managed" makes CRI own the image; "pinned" keeps the kubelet's image
// garbage collector away from the node's bundled images (CRI Image.pinned).
const (
	criImageLabel  = "io.cri-containerd.image"
	criPinnedLabel = "io.cri-containerd.pinned"
)

// ImportProgress reports an archive import: File is the archive path, Done and Total are bytes read
// and the archive size.
type ImportProgress struct {
	File        string
	Done, Total int64
}

// ImportedImage is one image reference created or updated by an import.
type ImportedImage struct {
	// Name is the image reference from the archive's index (io.containerd.image.name, else
	// org.opencontainers.image.ref.name), e.g. "nodekit.local/pause:3.10".
	Name string
	// Digest is the manifest digest, "sha256:...".
	Digest string
	// File is the archive it came from.
	File string
}

// ArchiveSuffixes are the file names ImportDir picks up: OCI layout / docker-save tarballs.
var ArchiveSuffixes = []string{".tar"}

// Importer loads OCI image archives into containerd's k8s.io namespace through the containerd client
// (Client.Import, then unpack into the default snapshotter so the first container starts without
// unpacking). It works against containerd 1.6 and 2.x.
type Importer struct {
	client *containerd.Client
}

// NewImporter connects to containerd's gRPC socket (Supervisor.Address()).
func NewImporter(address string) (*Importer, error) {
	c, err := containerd.New(address, containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", address, err)
	}
	return &Importer{client: c}, nil
}

// Close closes the containerd connection.
func (im *Importer) Close() error { return im.client.Close() }

// ImportFile imports one archive (an OCI image layout tar whose index.json names each manifest with
// io.containerd.image.name or org.opencontainers.image.ref.name, or a `docker save` tar) for the host
// platform, labels the images for CRI and unpacks them. An archive that fails to unpack (a missing or
// corrupt layer) leaves the image records as they were before the call. progress, if not nil, is called as bytes are
// read (at most every 64 KiB read) and once at the end. Errors name the file.
func (im *Importer) ImportFile(ctx context.Context, path string, progress func(ImportProgress)) ([]ImportedImage, error) {
	ctx = namespaces.WithNamespace(ctx, Namespace)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	var r io.Reader = f
	pr := &progressReader{r: f, file: path, total: fi.Size(), fn: progress}
	if progress != nil {
		r = pr
	}
	// The image records before the import, to put back if it fails half-way (see rollback).
	before, err := im.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("import %s: listing images: %w", path, err)
	}
	imgs, err := im.client.Import(ctx, r,
		containerd.WithImageRefTranslator(fullRefOnly),
		containerd.WithImageLabels(map[string]string{criImageLabel: "managed", criPinnedLabel: "pinned"}))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import %s: the archive names no image (index.json needs an io.containerd.image.name or org.opencontainers.image.ref.name annotation)", path)
	}
	if progress != nil {
		pr.report(true)
	}
	out := make([]ImportedImage, 0, len(imgs))
	for _, img := range imgs {
		if err := containerd.NewImage(im.client, img).Unpack(ctx, ""); err != nil {
			im.rollback(ctx, imgs, before)
			return nil, fmt.Errorf("import %s: unpack %s: %w", path, img.Name, err)
		}
		out = append(out, ImportedImage{Name: img.Name, Digest: img.Target.Digest.String(), File: path})
	}
	return out, nil
}

// rollback undoes the image records of a failed import: a name that existed before points at its old
// target again, a new name is deleted. Without it, an archive missing a layer blob would leave an image
// that CRI lists (and the kubelet believes present) but that can never start a container. Blobs the
// import wrote are left to containerd's garbage collector (nothing references them any more).
func (im *Importer) rollback(ctx context.Context, imgs []images.Image, before []images.Image) {
	prev := make(map[string]images.Image, len(before))
	for _, img := range before {
		prev[img.Name] = img
	}
	is := im.client.ImageService()
	for _, img := range imgs {
		if old, ok := prev[img.Name]; ok {
			_, _ = is.Update(ctx, old, "target", "labels")
			continue
		}
		_ = is.Delete(ctx, img.Name)
	}
}

// fullRefOnly accepts an org.opencontainers.image.ref.name annotation as the image name only when it is
// a full reference ("registry/repo:tag"); the OCI spec also allows a bare tag ("v1"), which names no image.
func fullRefOnly(ref string) string {
	if strings.ContainsAny(ref, "/:@") {
		return ref
	}
	return ""
}

// ImportDir imports every archive (ArchiveSuffixes) directly inside dir, in name order: the k3s airgap
// convention of an images directory loaded at agent start. A missing dir imports nothing.
func (im *Importer) ImportDir(ctx context.Context, dir string, progress func(ImportProgress)) ([]ImportedImage, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	var all []ImportedImage
	for _, e := range entries {
		if e.IsDir() || !slices.ContainsFunc(ArchiveSuffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
			continue
		}
		imgs, err := im.ImportFile(ctx, filepath.Join(dir, e.Name()), progress)
		if err != nil {
			return all, err
		}
		all = append(all, imgs...)
	}
	return all, nil
}

// progressReader counts bytes for ImportProgress callbacks.
type progressReader struct {
	r          io.Reader
	file       string
	total      int64
	done       atomic.Int64
	lastReport int64
	fn         func(ImportProgress)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done.Add(int64(n))
	p.report(false)
	return n, err
}

func (p *progressReader) report(final bool) {
	d := p.done.Load()
	if final || d-p.lastReport >= 64<<10 {
		p.lastReport = d
		p.fn(ImportProgress{File: p.file, Done: d, Total: p.total})
	}
}
