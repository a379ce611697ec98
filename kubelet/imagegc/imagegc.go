// Package imagegc garbage-collects container images when the image filesystem fills up, as upstream's
// kubelet does (pkg/kubelet/images/image_gc_manager.go, imageGCHighThresholdPercent /
// imageGCLowThresholdPercent / imageMinimumGCAge):
//
//   - every period the runtime's images are listed (CRI ListImages); an image is first detected the first
//     time it is seen, and last used whenever a container (running or not, CRI ListContainers) refers
//     to it;
//   - the image filesystem is the one CRI ImageFsInfo names (its mountpoint, statfs for capacity and
//     available bytes); when its usage reaches HighThresholdPercent, enough images are removed (CRI
//     RemoveImage) to bring it down to LowThresholdPercent, least recently used first, then the oldest
//     detected;
//   - never removed: images in use by a container, pinned images (CRI Image.pinned, and the references
//     of Config.PinnedImages: the runtime's pause image and the node's bundled images, which containerd
//     1.6's CRI does not report as pinned), the sandboxImage of containerd's CRI config as CRI Status
//     verbose reports it, and images detected less than MinAge ago;
//   - when not enough can be freed, the node gets a Warning event FreeDiskSpaceFailed ("Failed to garbage
//     collect required amount of images. Attempted to free N bytes, but only found M bytes eligible to
//     free."); when a collection fails twice in a row, ImageGCFailed.
package imagegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's KubeletConfiguration defaults and the image GC period (pkg/kubelet ImageGCPeriod).
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
	DefaultPeriod               = 5 * time.Minute
)

// Event reasons, as upstream's (pkg/kubelet/events).
const (
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventImageGCFailed       = "ImageGCFailed"
)

// Runtime is the part of the CRI RuntimeService image GC needs (the containers' images and the runtime's
// sandbox image); runtimeapi.RuntimeServiceClient has it.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
}

// Images is the part of the CRI ImageService image GC needs; runtimeapi.ImageServiceClient has it.
type Images interface {
	ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, opts ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error)
	RemoveImage(ctx context.Context, in *runtimeapi.RemoveImageRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error)
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
}

// Policy is when and how much to collect. 0 <= Low < High <= 100 (High 100 disables collection);
// MinAge >= 0.
type Policy struct {
	HighThresholdPercent int
	LowThresholdPercent  int
	MinAge               time.Duration
}

// Validate checks the policy; the error names the KubeletConfiguration field.
func (p Policy) Validate() error {
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return fmt.Errorf("imageGCHighThresholdPercent: %d is not in 0-100", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return fmt.Errorf("imageGCLowThresholdPercent: %d is not in 0-100", p.LowThresholdPercent)
	case p.LowThresholdPercent >= p.HighThresholdPercent && p.HighThresholdPercent != 100:
		return fmt.Errorf("imageGCLowThresholdPercent: %d must be less than imageGCHighThresholdPercent %d", p.LowThresholdPercent, p.HighThresholdPercent)
	case p.MinAge < 0:
		return fmt.Errorf("imageMinimumGCAge: %v must not be negative", p.MinAge)
	}
	return nil
}

// Config configures a Manager. Runtime, Images and Recorder are required.
type Config struct {
	Runtime  Runtime
	Images   Images
	Policy   Policy
	Recorder record.EventRecorder
	// Node is the object the node events are about (kind Node, name and UID = name, as upstream's nodeRef).
	Node *v1.ObjectReference
	// PinnedImages are image references never collected: the runtime's pause image and the images the
	// node imported as pinned (containerd 1.6's CRI does not report the io.cri-containerd.pinned label).
	PinnedImages []string
	Logger       *slog.Logger
}

// Manager tracks image use and collects unused images. Create with New; safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	failures int // consecutive failed collections; Run's goroutine only

	mu      sync.Mutex
	records map[string]*imageRecord // image ID → record
}

type imageRecord struct {
	firstDetected time.Time
	lastUsed      time.Time
	size          uint64
	pinned        bool
	ref           string // a tag or digest, for logs
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil || cfg.Images == nil || cfg.Recorder == nil {
		return nil, errors.New("imagegc: Runtime, Images and Recorder are required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, now: time.Now, records: map[string]*imageRecord{}}, nil
}

// Run detects images and collects every period until ctx ends. A failed collection is logged; the
// second failure in a row and later ones emit ImageGCFailed on the node.
func (m *Manager) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	if _, err := m.detect(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("image GC: detect images", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.GarbageCollect(ctx)
		if err == nil || ctx.Err() != nil {
			m.failures = 0
			continue
		}
		m.failures++
		m.log.Error("image garbage collection failed", "err", err, "consecutive", m.failures)
		if m.failures > 1 {
			m.cfg.Recorder.Eventf(m.cfg.Node, v1.EventTypeWarning, EventImageGCFailed, "%s", err.Error())
		}
	}
}

// FsStats are the image filesystem's figures (bytes).
type FsStats struct {
	Mountpoint          string
	Capacity, Available uint64
	InodesTotal         uint64
	InodesFree          uint64
	// UsedBytes is what the runtime reports its images use.
	UsedBytes uint64
}

// ImageFs returns the image filesystem's figures: CRI ImageFsInfo's mountpoint and used bytes, statfs
// of the mountpoint for capacity, available bytes and inodes.
func ImageFs(ctx context.Context, images Images) (FsStats, error) {
	resp, err := images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return FsStats{}, fmt.Errorf("CRI ImageFsInfo: %w", err)
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return FsStats{}, errors.New("CRI ImageFsInfo: no image filesystem with a mountpoint")
	}
	fs := fss[0]
	var st unix.Statfs_t
	if err := unix.Statfs(fs.GetFsId().GetMountpoint(), &st); err != nil {
		return FsStats{}, fmt.Errorf("statfs image filesystem %s: %w", fs.GetFsId().GetMountpoint(), err)
	}
	return FsStats{
		Mountpoint: fs.GetFsId().GetMountpoint(),
		Capacity:   st.Blocks * uint64(st.Bsize), Available: st.Bavail * uint64(st.Bsize),
		InodesTotal: st.Files, InodesFree: st.Ffree, UsedBytes: fs.GetUsedBytes().GetValue(),
	}, nil
}

// GarbageCollect detects images, and when the image filesystem's usage is at or above the high
// threshold removes unused images until it would be at the low threshold. Not finding enough to remove
// emits FreeDiskSpaceFailed and returns the same error.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	if m.cfg.Policy.HighThresholdPercent == 100 {
		return nil
	}
	inUse, err := m.detect(ctx)
	if err != nil {
		return err
	}
	fs, err := ImageFs(ctx, m.cfg.Images)
	if err != nil {
		return err
	}
	if fs.Capacity == 0 {
		return fmt.Errorf("image filesystem %s has capacity 0", fs.Mountpoint)
	}
	usage := 100 - int(fs.Available*100/fs.Capacity)
	if usage < m.cfg.Policy.HighThresholdPercent {
		return nil
	}
	toFree := int64(fs.Capacity)*int64(100-m.cfg.Policy.LowThresholdPercent)/100 - int64(fs.Available)
	m.log.Info("image filesystem usage over the high threshold, collecting images", "usagePercent", usage,
		"highThresholdPercent", m.cfg.Policy.HighThresholdPercent, "bytesToFree", toFree, "mountpoint", fs.Mountpoint)
	freed, err := m.free(ctx, toFree, inUse)
	if err != nil {
		return err
	}
	if freed < toFree {
		err := fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", toFree, freed) //nolint:staticcheck // upstream's wording
		m.cfg.Recorder.Eventf(m.cfg.Node, v1.EventTypeWarning, EventFreeDiskSpaceFailed, "%s", err.Error())
		return err
	}
	return nil
}

// DeleteUnusedImages removes every unused image old enough (the eviction manager's node-level reclaim
// under disk pressure) and returns the bytes freed.
func (m *Manager) DeleteUnusedImages(ctx context.Context) (int64, error) {
	inUse, err := m.detect(ctx)
	if err != nil {
		return 0, err
	}
	return m.free(ctx, math.MaxInt64, inUse)
}

// detect lists images and containers, updates the records and returns the IDs in use.
func (m *Manager) detect(ctx context.Context) (map[string]bool, error) {
	imgs, err := m.cfg.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListImages: %w", err)
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	protected := slices.Clone(m.cfg.PinnedImages)
	if s := m.runtimeSandboxImage(ctx); s != "" {
		protected = append(protected, s)
	}
	// Refs a container or the sandbox names, resolved to image IDs through the image list.
	idOf := map[string]string{}
	for _, img := range imgs.GetImages() {
		idOf[img.GetId()] = img.GetId()
		for _, r := range append(slices.Clone(img.GetRepoTags()), img.GetRepoDigests()...) {
			idOf[r] = img.GetId()
		}
	}
	inUse := map[string]bool{}
	for _, c := range ctrs.GetContainers() {
		for _, r := range []string{c.GetImageRef(), c.GetImage().GetImage()} {
			if id, ok := idOf[r]; ok {
				inUse[id] = true
			}
		}
	}
	for _, r := range protected {
		if id, ok := idOf[r]; ok {
			inUse[id] = true
		}
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, img := range imgs.GetImages() {
		id := img.GetId()
		seen[id] = true
		r := m.records[id]
		if r == nil {
			r = &imageRecord{firstDetected: now}
			m.records[id] = r
		}
		r.size, r.pinned = img.GetSize(), img.GetPinned()
		r.ref = id
		if tags := img.GetRepoTags(); len(tags) > 0 {
			r.ref = tags[0]
		}
		if inUse[id] {
			r.lastUsed = now
		}
	}
	for id := range m.records {
		if !seen[id] {
			delete(m.records, id)
		}
	}
	return inUse, nil
}

// runtimeSandboxImage reads containerd's sandboxImage from CRI Status verbose (info "config"); "" if
// the runtime does not report one.
func (m *Manager) runtimeSandboxImage(ctx context.Context) string {
	resp, err := m.cfg.Runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(resp.GetInfo()["config"]), &cfg) != nil {
		return ""
	}
	return cfg.SandboxImage
}

// free removes unused images, least recently used first, until toFree bytes are freed; it returns the
// bytes freed. A failed removal is logged and skipped.
func (m *Manager) free(ctx context.Context, toFree int64, inUse map[string]bool) (int64, error) {
	now := m.now()
	type candidate struct {
		id string
		imageRecord
	}
	m.mu.Lock()
	var cands []candidate
	for id, r := range m.records {
		if inUse[id] || r.pinned || now.Sub(r.firstDetected) < m.cfg.Policy.MinAge {
			continue
		}
		cands = append(cands, candidate{id, *r})
	}
	m.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].lastUsed.Equal(cands[j].lastUsed) {
			return cands[i].lastUsed.Before(cands[j].lastUsed)
		}
		return cands[i].firstDetected.Before(cands[j].firstDetected)
	})
	var freed int64
	for _, c := range cands {
		if freed >= toFree {
			break
		}
		if _, err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: c.id}}); err != nil {
			if ctx.Err() != nil {
				return freed, ctx.Err()
			}
			m.log.Warn("image GC: remove image", "image", c.ref, "imageID", c.id, "err", err)
			continue
		}
		m.log.Info("image removed by garbage collection", "image", c.ref, "imageID", c.id, "size", c.size,
			"lastUsed", c.lastUsed, "firstDetected", c.firstDetected)
		m.mu.Lock()
		delete(m.records, c.id)
		m.mu.Unlock()
		freed += int64(c.size)
	}
	return freed, nil
}
