package imagegc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeCRI struct {
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
	removed    []string
	mountpoint string
}

func (f *fakeCRI) ListImages(context.Context, *runtimeapi.ListImagesRequest, ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: f.images}, nil
}

func (f *fakeCRI) RemoveImage(_ context.Context, in *runtimeapi.RemoveImageRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	f.removed = append(f.removed, in.GetImage().GetImage())
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.Id == in.GetImage().GetImage() })
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeCRI) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.mountpoint}}}}, nil
}

func (f *fakeCRI) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

func (f *fakeCRI) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": `{"sandboxImage":"registry/pause:3.10"}`}}, nil
}

// TestCollect: unused images go least recently used first; images in use, pinned, the sandbox image
// and images younger than MinAge stay; a shortfall emits FreeDiskSpaceFailed.
func TestCollect(t *testing.T) {
	img := func(id, tag string, pinned bool) *runtimeapi.Image {
		return &runtimeapi.Image{Id: id, RepoTags: []string{tag}, Size: 1000, Pinned: pinned}
	}
	f := &fakeCRI{mountpoint: t.TempDir(), images: []*runtimeapi.Image{
		img("sha256:used", "registry/app:v1", false), img("sha256:old", "registry/app:v0", false),
		img("sha256:lru", "registry/app:v2", false), img("sha256:pinned", "registry/pinned:1", true),
		img("sha256:pause", "registry/pause:3.10", false), img("sha256:cfg", "registry/extra-pause:1", false),
	}}
	ctr := func(ref string) *runtimeapi.Container {
		return &runtimeapi.Container{ImageRef: ref, Image: &runtimeapi.ImageSpec{Image: ref}}
	}
	rec := record.NewFakeRecorder(10)
	m, err := New(Config{Runtime: f, Images: f, Recorder: rec, PinnedImages: []string{"registry/extra-pause:1"},
		Policy: Policy{HighThresholdPercent: 0, LowThresholdPercent: 0, MinAge: time.Minute}})
	if err == nil {
		t.Fatal("Low 0 >= High 0 accepted")
	}
	m, err = New(Config{Runtime: f, Images: f, Recorder: rec, PinnedImages: []string{"registry/extra-pause:1"},
		Policy: Policy{HighThresholdPercent: 1, LowThresholdPercent: 0, MinAge: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m.now = func() time.Time { return now }
	// v2 was in use a while ago, v0 never; "used" is in use now.
	f.containers = []*runtimeapi.Container{ctr("sha256:lru"), ctr("sha256:used")}
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.containers = []*runtimeapi.Container{ctr("registry/app:v1")}
	now = now.Add(30 * time.Second)
	if freed, _ := m.DeleteUnusedImages(context.Background()); freed != 0 {
		t.Fatalf("freed %d bytes of images younger than MinAge", freed)
	}
	now = now.Add(time.Minute)
	err = m.GarbageCollect(context.Background())
	if want := []string{"sha256:old", "sha256:lru"}; !slices.Equal(f.removed, want) {
		t.Fatalf("removed %v, want %v (never used first, then least recently used)", f.removed, want)
	}
	if err == nil || !strings.Contains(err.Error(), "but only found 2000 bytes eligible to free") {
		t.Fatalf("GarbageCollect = %v, want the shortfall", err)
	}
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Warning FreeDiskSpaceFailed Failed to garbage collect required amount of images.") {
		t.Errorf("event %q", ev)
	}
}
