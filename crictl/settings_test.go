package crictl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadSettings(t *testing.T) {
	p := writeFile(t, "crictl.yaml", "runtime-endpoint: unix:///run/a.sock\nimage-endpoint: unix:///run/b.sock\ntimeout: 7\ndebug: true\npull-image-on-create: true\n")
	s, err := readSettings(p)
	if err != nil {
		t.Fatal(err)
	}
	want := settings{RuntimeEndpoint: "unix:///run/a.sock", ImageEndpoint: "unix:///run/b.sock", Timeout: 7 * time.Second, Debug: true, PullImageOnCreate: true}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	bad := writeFile(t, "crictl.yaml", "runtime-endpoint: x\ntimeout: soon\n")
	if _, err := readSettings(bad); err == nil || !strings.Contains(err.Error(), "crictl.yaml:2: timeout") {
		t.Errorf("bad timeout: %v", err)
	}
	unknown := writeFile(t, "crictl.yaml", "runtime_endpoint: x\n")
	if _, err := readSettings(unknown); err == nil || !strings.Contains(err.Error(), `crictl.yaml:1: unknown option "runtime_endpoint"`) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := readSettings(filepath.Join(t.TempDir(), "none.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// resolveArgs parses global flags like a crictl invocation and resolves the configuration.
func resolveArgs(t *testing.T, args ...string) (*app, error) {
	t.Helper()
	a := &app{streams: streams{errOut: os.Stderr}}
	fs := a.tree().Flags()
	if err := fs.Parse(singleDashLong(fs, args)); err != nil {
		t.Fatal(err)
	}
	return a, a.resolve(fs, false)
}

func TestResolvePrecedence(t *testing.T) {
	cfg := writeFile(t, "crictl.yaml", "runtime-endpoint: unix:///file.sock\ntimeout: 9\n")
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "")
	t.Setenv("IMAGE_SERVICE_ENDPOINT", "")
	t.Setenv("CRI_CONFIG_FILE", "")

	a, err := resolveArgs(t, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.RuntimeEndpoint != "unix:///file.sock" || a.cfg.Timeout != 9*time.Second {
		t.Errorf("file only: %+v", a.cfg)
	}

	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "unix:///env.sock")
	t.Setenv("IMAGE_SERVICE_ENDPOINT", "unix:///img.sock")
	a, _ = resolveArgs(t, "-c", cfg)
	if a.cfg.RuntimeEndpoint != "unix:///env.sock" || a.cfg.ImageEndpoint != "unix:///img.sock" {
		t.Errorf("env over file: %+v", a.cfg)
	}

	a, _ = resolveArgs(t, "-c", cfg, "-r", "unix:///flag.sock", "-t", "3s", "-D")
	if a.cfg.RuntimeEndpoint != "unix:///flag.sock" || a.cfg.Timeout != 3*time.Second || !a.cfg.Debug {
		t.Errorf("flag over env and file: %+v", a.cfg)
	}

	t.Setenv("CRI_CONFIG_FILE", cfg)
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "")
	if a, _ = resolveArgs(t); a.cfg.RuntimeEndpoint != "unix:///file.sock" {
		t.Errorf("CRI_CONFIG_FILE: %+v", a.cfg)
	}

	// An explicitly named config file must exist; the default one need not.
	if _, err := resolveArgs(t, "--config", filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("missing --config file: want an error")
	}
	t.Setenv("CRI_CONFIG_FILE", "")
	a, err = resolveArgs(t, "-t", "0s")
	if err != nil && !strings.Contains(err.Error(), defaultConfigPath) {
		t.Fatal(err)
	}
	if err == nil && a.cfg.Timeout != defaultTimeout {
		t.Errorf("-t 0: timeout %v, want the default %v", a.cfg.Timeout, defaultTimeout)
	}
}

func TestDefaultEndpointIsManagedContainerd(t *testing.T) {
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "")
	t.Setenv("CRI_CONFIG_FILE", "")
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd", "containerd.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := resolveArgs(t, "--config", writeFile(t, "crictl.yaml", ""), "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if ep, err := a.endpoint(); err != nil || ep != "unix://"+sock {
		t.Errorf("endpoint() = %q, %v; want nodekit's managed containerd unix://%s", ep, err, sock)
	}
	a, _ = resolveArgs(t, "--config", writeFile(t, "crictl.yaml", ""), "--data-dir", filepath.Join(dir, "none"))
	if _, err := a.endpoint(); err == nil && !fileExists("/run/containerd/containerd.sock") {
		t.Error("no socket anywhere: want an error naming the defaults")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestVersionAndHelpNeedNoRuntime(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"--version"}, nil, &out, &out); err != nil || !strings.HasPrefix(out.String(), "crictl version ") {
		t.Errorf("--version: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := Run(context.Background(), []string{"--help"}, nil, &out, &out); err != nil || !strings.Contains(out.String(), "--runtime-endpoint") {
		t.Errorf("--help: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := Run(context.Background(), []string{"-r", "unix:///nonexistent.sock", "frobnicate"}, nil, &out, &out); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %v", err)
	}
}
