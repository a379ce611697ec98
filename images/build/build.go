// Package build turns the sources of nodekit's bundled images (images/pause, images/demo-server,
// images/coredns) into OCI image archives: it cross-compiles each image's static Go binary with the Go toolchain
// (CGO_ENABLED=0, -trimpath, -buildvcs=false, fixed ldflags), packs it into a single layer with fixed
// timestamps and ownership, and writes an OCI image layout as a tar whose index.json names the image
// with the io.containerd.image.name and org.opencontainers.image.ref.name annotations (what `ctr images
// import` and the containerd client's Import read). Same sources and toolchain → same bytes and digests.
//
// Building needs the nodekit module source tree and a Go toolchain; nodes get the archives instead.
package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodekit/nodekit/images/bundled"
)

// ModulePath is the Go module whose sources the images are built from.
const ModulePath = "github.com/nodekit/nodekit"

// Annotations put on each manifest descriptor of an archive's index.json.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// epoch is the fixed timestamp of every file, layer history entry and image config.
var epoch = time.Unix(0, 0).UTC()

// Spec describes one bundled image.
type Spec struct {
	// Ref is the image reference, e.g. bundled.Pause.
	Ref string
	// Package is the Go package of the image's binary, relative to Module, e.g. "./images/pause".
	Package string
	// Module is the directory, relative to the nodekit source tree, of the Go module that Package is
	// built in (its own go.mod and go.sum); empty: the nodekit module itself. images/coredns is such a
	// module, so that CoreDNS's dependencies stay out of nodekit's go.mod.
	Module string
	// Binary is the binary's path inside the image, e.g. "/pause".
	Binary string
	// Ldflags are extra linker flags (e.g. "-X main.defaultVersion=v1").
	Ldflags []string
	// Links are absolute paths in the image symlinked to Binary (the demo server's toolbox commands).
	Links []string
	// Dirs are empty directories to create (mode 0755, or 01777 for /tmp).
	Dirs []string
	// Entrypoint and Env go into the image config.
	Entrypoint []string
	Env        []string
}

func demoServer(ref, version string) Spec {
	links := make([]string, len(bundled.Toolbox))
	for i, t := range bundled.Toolbox {
		links[i] = "/bin/" + t
	}
	return Spec{
		Ref: ref, Package: "./images/demo-server", Binary: "/demo-server",
		Ldflags: []string{"-X main.defaultVersion=" + version},
		Links:   links, Dirs: []string{"/bin", "/dev", "/etc", "/proc", "/sys", "/tmp"},
		Entrypoint: []string{"/demo-server"}, Env: []string{"PATH=/bin"},
	}
}

// Specs are the bundled images, in bundled.All order.
var Specs = []Spec{
	{Ref: bundled.Pause, Package: "./images/pause", Binary: "/pause", Ldflags: []string{"-X main.version=3.10"},
		Dirs: []string{"/dev", "/etc", "/proc", "/sys"}, Entrypoint: []string{"/pause"}},
	demoServer(bundled.DemoServerV1, "v1"),
	demoServer(bundled.DemoServerV2, "v2"),
	{Ref: bundled.CoreDNS, Module: "images/coredns", Package: ".", Binary: "/coredns",
		Dirs: []string{"/dev", "/etc", "/proc", "/sys", "/tmp"}, Entrypoint: []string{"/coredns"}},
}

// Options configure Build.
type Options struct {
	// ModuleDir is the nodekit source tree; default FindModuleDir(".").
	ModuleDir string
	// OutDir receives one archive per image (ArchiveName); created if missing.
	OutDir string
	// Go is the go command; default "go" from PATH, else $(go env GOROOT)/bin/go of this binary.
	Go string
	// Arch is the GOARCH to build for; default runtime.GOARCH.
	Arch string
	// Logger receives one line per built image; default slog.Default().
	Logger *slog.Logger
}

// Result is one written archive.
type Result struct {
	Ref string
	// File is the archive path.
	File string
	// Digest is the image manifest digest ("sha256:...").
	Digest string
}

// ArchiveName is the file name of ref's archive: "pause-3.10.tar", "demo-server-v1.tar".
func ArchiveName(ref string) string {
	name := path.Base(ref)
	return strings.ReplaceAll(name, ":", "-") + ".tar"
}

// FindModuleDir walks up from start to the directory whose go.mod declares ModulePath.
func FindModuleDir(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == ModulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s source tree (go.mod) at or above %s: building images needs the nodekit sources", ModulePath, start)
		}
		dir = parent
	}
}

// SourceHash is a hex SHA-256 over everything the archives depend on: the files under images/ (tests
// excluded), go.mod, go.sum, the Go toolchain version and the target arch. Test helpers key their archive cache on it.
func SourceHash(moduleDir, goCmd, arch string) (string, error) {
	h := sha256.New()
	ver, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("%s env GOVERSION: %w", goCmd, err)
	}
	fmt.Fprintf(h, "go=%s arch=%s\n", strings.TrimSpace(string(ver)), arch)
	var files []string
	err = filepath.WalkDir(filepath.Join(moduleDir, "images"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	files = append(files, filepath.Join(moduleDir, "go.mod"), filepath.Join(moduleDir, "go.sum"))
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(moduleDir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// GoCommand returns the go command to build with: "go" from PATH, else the toolchain under GOROOT.
func GoCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no go command in PATH or %s: building images needs a Go toolchain", p)
	}
	return p, nil
}

func (o *Options) defaults() error {
	var err error
	if o.ModuleDir == "" {
		if o.ModuleDir, err = FindModuleDir("."); err != nil {
			return err
		}
	}
	if o.OutDir == "" {
		return errors.New("images build: OutDir is empty")
	}
	if o.Go == "" {
		if o.Go, err = GoCommand(); err != nil {
			return err
		}
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Build compiles and writes every image of Specs into opts.OutDir. An archive is replaced atomically
// (written to a temporary file, then renamed). Errors name the image and the failing step (compile
// errors include the go command's output).
func Build(ctx context.Context, opts Options) ([]Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "nodekit-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var results []Result
	for i, spec := range Specs {
		bin := filepath.Join(work, fmt.Sprintf("bin-%d", i))
		if err := compile(ctx, opts, spec, bin); err != nil {
			return results, fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		img, err := Image(spec, bin, opts.Arch)
		if err != nil {
			return results, fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		file := filepath.Join(opts.OutDir, ArchiveName(spec.Ref))
		digest, err := WriteArchive(img, spec.Ref, file, filepath.Join(work, fmt.Sprintf("layout-%d", i)))
		if err != nil {
			return results, fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		opts.Logger.Info("built image", "image", spec.Ref, "file", file, "digest", digest)
		results = append(results, Result{Ref: spec.Ref, File: file, Digest: digest})
	}
	return results, nil
}

// compile builds spec.Package as a static linux binary at out.
func compile(ctx context.Context, opts Options, spec Spec, out string) error {
	ldflags := strings.Join(append([]string{"-s", "-w", "-buildid="}, spec.Ldflags...), " ")
	cmd := exec.CommandContext(ctx, opts.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, spec.Package)
	cmd.Dir = filepath.Join(opts.ModuleDir, spec.Module)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+opts.Arch, "GOFLAGS=-mod=readonly")
	if outb, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", spec.Package, cmd.Dir, err, outb)
	}
	return nil
}

// Image assembles the OCI image of spec around the compiled binary at bin: one layer (see Layer) and
// a config with spec's entrypoint and env, created at the Unix epoch.
func Image(spec Spec, bin, arch string) (v1.Image, error) {
	layerTar, err := Layer(spec, bin)
	if err != nil {
		return nil, err
	}
	return FromLayer(layerTar, ImageConfig{Arch: arch, Entrypoint: spec.Entrypoint, Env: spec.Env,
		CreatedBy: "nodekit images build ./" + path.Join(spec.Module, spec.Package),
		Labels:    map[string]string{"org.opencontainers.image.source": sourceOf(spec)}})
}

// sourceOf is the Go import path of spec's binary: ModulePath/<Module>/<Package>, cleaned.
func sourceOf(spec Spec) string {
	return path.Join(ModulePath, spec.Module, spec.Package)
}

// ImageConfig is what FromLayer puts in an image's config and history.
type ImageConfig struct {
	// Arch is the GOARCH the layer's binaries are for.
	Arch string
	// Entrypoint, Cmd, Env and Labels go into the image config as given.
	Entrypoint, Cmd, Env []string
	Labels               map[string]string
	// User is the config's user ("1234", "uid:gid", a name; empty: root) and WorkingDir its working
	// directory (empty: the runtime's default, /).
	User, WorkingDir string
	// CreatedBy is the layer's history entry.
	CreatedBy string
}

// FromLayer assembles a linux OCI image of one layer, the uncompressed tar layerTar, with c's config,
// created at the Unix epoch (same layer and config, same digest).
func FromLayer(layerTar []byte, c ImageConfig) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: c.CreatedBy},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.OS, cfg.Architecture = "linux", c.Arch
	cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.Env = c.Entrypoint, c.Cmd, c.Env
	cfg.Config.Labels = c.Labels
	cfg.Config.User, cfg.Config.WorkingDir = c.User, c.WorkingDir
	return mutate.ConfigFile(img, cfg)
}

// Layer returns the uncompressed layer tar for spec: its directories, the binary (mode 0755) and the
// symlinks, sorted by path, owned by 0:0, timestamped at the Unix epoch.
func Layer(spec Spec, bin string) ([]byte, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	var entries []entry
	dirs := map[string]bool{}
	addDir := func(d string) {
		for ; d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			mode := int64(0o755)
			if d == "/tmp" {
				mode = 0o1777
			}
			entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode}})
		}
	}
	for _, d := range spec.Dirs {
		addDir(d)
	}
	addDir(path.Dir(spec.Binary))
	entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(spec.Binary, "/"), Mode: 0o755, Size: int64(len(data))}, data: data})
	for _, l := range spec.Links {
		addDir(path.Dir(l))
		entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(l, "/"), Linkname: spec.Binary, Mode: 0o777}})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.hdr.Name, b.hdr.Name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		e.hdr.ModTime, e.hdr.Format = epoch, tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img as an OCI image layout tar at file (via a layout in scratch, which must not
// exist), with ref in the io.containerd.image.name and org.opencontainers.image.ref.name annotations of
// its index.json entry. It returns the manifest digest.
func WriteArchive(img v1.Image, ref, file, scratch string) (string, error) {
	lp, err := layout.Write(scratch, empty.Index)
	if err != nil {
		return "", err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		AnnotationContainerdName: ref,
		AnnotationRefName:        ref,
	})); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	tmp := file + ".tmp"
	if err := tarDir(scratch, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return digest.String(), os.Rename(tmp, file)
}

// tarDir writes dir's tree as a tar with sorted entries, fixed times and 0:0 ownership.
func tarDir(dir, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	var paths []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		if fi.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.IsDir() {
			continue
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// Ensure builds the bundled images into dir when it holds no image archive (*.tar) and a nodekit
// source tree is found from the working directory, so that the agents have images to import. With
// archives in dir it does nothing; with no source tree either it logs a warning (pods then need their
// images in containerd) and returns nil. log defaults to slog.Default().
func Ensure(ctx context.Context, dir string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tar")); len(m) > 0 {
		return nil
	}
	src, err := FindModuleDir(".")
	if err != nil {
		log.Warn("no image archives and no nodekit source tree to build them from: pods need their images in containerd", "images_dir", dir)
		return nil
	}
	log.Info("building the bundled images", "source", src, "out", dir)
	// Build logs one line per image built.
	if _, err := Build(ctx, Options{ModuleDir: src, OutDir: dir, Logger: log}); err != nil {
		return fmt.Errorf("building the bundled images into %s: %w", dir, err)
	}
	return nil
}
