package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime has one running container logging to path; ReopenContainerLog creates a new file, as
// containerd does.
type fakeRuntime struct {
	path      string
	reopenErr error
	reopens   int
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}}}}, nil
}

func (f *fakeRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", LogPath: f.path}}, nil
}

func (f *fakeRuntime) ReopenContainerLog(context.Context, *runtimeapi.ReopenContainerLogRequest, ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	if f.reopenErr != nil {
		return nil, f.reopenErr
	}
	f.reopens++
	return &runtimeapi.ReopenContainerLogResponse{}, os.WriteFile(f.path, nil, 0o640)
}

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	rt := &fakeRuntime{path: filepath.Join(dir, "0.log")}
	m, err := New(rt, Policy{MaxSize: 10, MaxFiles: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	for i, line := range []string{"first line\n", "second line\n", "third line\n", "fourth line\n"} {
		if err := os.WriteFile(rt.path, []byte(line), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := m.RotateAll(context.Background()); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		now = now.Add(time.Second)
	}
	// Small files are left alone.
	os.WriteFile(rt.path, []byte("short\n"), 0o640)
	if err := m.RotateAll(context.Background()); err != nil || rt.reopens != 4 {
		t.Fatalf("a 6-byte log was rotated (reopens %d, err %v)", rt.reopens, err)
	}
	files, _ := filepath.Glob(rt.path + ".*")
	sort.Strings(files)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if want := "0.log.20260101-000002.gz 0.log.20260101-000003"; strings.Join(names, " ") != want {
		t.Fatalf("rotated files %v, want %s (MaxFiles 3: live + 2)", names, want)
	}
	f, _ := os.Open(files[0])
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(zr)
	f.Close()
	if string(b) != "third line\n" {
		t.Errorf("compressed file holds %q", b)
	}

	// A failed reopen puts the file back.
	rt.reopenErr = errors.New("container gone")
	os.WriteFile(rt.path, []byte("fifth line, long\n"), 0o640)
	if err := m.RotateAll(context.Background()); err == nil || !strings.Contains(err.Error(), "container gone") {
		t.Fatalf("RotateAll = %v, want the reopen error", err)
	}
	if b, _ := os.ReadFile(rt.path); string(b) != "fifth line, long\n" {
		t.Errorf("after a failed reopen the live log holds %q", b)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{MaxSize: 0, MaxFiles: 5}).Validate(); err == nil || !strings.Contains(err.Error(), "containerLogMaxSize") {
		t.Errorf("MaxSize 0: %v", err)
	}
	if err := (Policy{MaxSize: 1, MaxFiles: 1}).Validate(); err == nil || !strings.Contains(err.Error(), "containerLogMaxFiles") {
		t.Errorf("MaxFiles 1: %v", err)
	}
}
