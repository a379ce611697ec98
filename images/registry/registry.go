// Package registry serves nodekit's bundled images from an OCI distribution registry on a loopback
// address (go-containerregistry's pkg/registry handler, in memory), so that CRI PullImage is exercised
// for real on a node without internet: every archive of an images directory is pushed into it at start
// under its repository path without the registry host ("nodekit.local/demo-server:v1" is served as
// "<addr>/demo-server:v1"). Missing tags answer MANIFEST_UNKNOWN (404), as any registry does.
package registry

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Server is a running loopback registry.
type Server struct {
	// Addr is the "127.0.0.1:port" the registry listens on.
	Addr string
	// Images maps each served reference (Addr/repo:tag) to its manifest digest.
	Images map[string]string

	srv *http.Server
	l   net.Listener
}

// Start listens on addr (must be a loopback address, "127.0.0.1:0" picks a port), serves the registry
// API (/v2/...) and pushes every *.tar OCI archive of imagesDir into it. Errors name the archive.
func Start(ctx context.Context, addr, imagesDir string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("registry --addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("registry --addr %q: only loopback addresses are allowed (the registry has no authentication and speaks plain HTTP)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	s := &Server{Addr: l.Addr().String(), Images: map[string]string{}, l: l}
	quiet := log.New(io.Discard, "", 0)
	s.srv = &http.Server{Handler: ggcrregistry.New(ggcrregistry.Logger(quiet)), ErrorLog: quiet}
	go s.srv.Serve(l)
	if err := s.seed(ctx, imagesDir, logger); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Ref maps a bundled image reference to the one this registry serves it as:
// "nodekit.local/demo-server:v1" → "127.0.0.1:5000/demo-server:v1".
func (s *Server) Ref(bundled string) string {
	_, rest, ok := strings.Cut(bundled, "/")
	if !ok {
		rest = bundled
	}
	return s.Addr + "/" + rest
}

// seed pushes every archive in dir.
func (s *Server) seed(ctx context.Context, dir string, logger *slog.Logger) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("registry: no image archives (*.tar) in %s", dir)
	}
	for _, f := range files {
		if err := s.push(ctx, f, logger); err != nil {
			return fmt.Errorf("registry: seeding from %s: %w", f, err)
		}
	}
	return nil
}

// push unpacks an OCI layout archive and pushes each named image in its index.
func (s *Server) push(ctx context.Context, file string, logger *slog.Logger) error {
	tmp, err := os.MkdirTemp("", "nodekit-registry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := untar(file, tmp); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(tmp)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		bundled := desc.Annotations["io.containerd.image.name"]
		if bundled == "" {
			bundled = desc.Annotations["org.opencontainers.image.ref.name"]
		}
		if bundled == "" {
			return errors.New("index entry without an io.containerd.image.name annotation")
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		ref, err := name.ParseReference(s.Ref(bundled), name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
			return err
		}
		s.Images[ref.String()] = desc.Digest.String()
		logger.Info("registry: pushed image", "image", ref.String(), "digest", desc.Digest.String())
	}
	return nil
}

// untar extracts the regular files and directories of an archive into dir, refusing paths that escape it.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("archive entry %q escapes the layout", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.Create(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			out.Close()
			if err != nil {
				return err
			}
		}
	}
}
