// Package logs rotates the CRI log files of running containers, as upstream's kubelet does
// (pkg/kubelet/logs, containerLogMaxSize / containerLogMaxFiles / containerLogMonitorInterval): every
// interval each running container's log file (CRI ContainerStatus logPath) is checked, and one that has
// reached MaxSize is renamed to <log>.<YYYYMMDD-hhmmss> and the runtime told to reopen it (CRI
// ReopenContainerLog), so the container writes a fresh file. Older rotated files are gzip-compressed to
// <log>.<stamp>.gz and the oldest removed, so that at most MaxFiles files (the live one included) are
// kept per container. The newest rotated file stays uncompressed, so a reader following the log
// (`kubectl logs -f`, k8s.io/cri-client's reader) finishes it before moving to the new file.
package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's KubeletConfiguration defaults and limits.
const (
	DefaultMaxSize         = 10 << 20 // containerLogMaxSize 10Mi
	DefaultMaxFiles        = 5        // containerLogMaxFiles
	DefaultMonitorInterval = 10 * time.Second

	timestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Runtime is the part of the CRI RuntimeService rotation needs; runtimeapi.RuntimeServiceClient has it.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, in *runtimeapi.ReopenContainerLogRequest, opts ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error)
}

// Policy is the rotation policy: a log file of MaxSize bytes or more is rotated, and at most MaxFiles
// files are kept per container (the live one included; at least 2).
type Policy struct {
	MaxSize  int64
	MaxFiles int
}

// Validate checks the policy; the error names the KubeletConfiguration field.
func (p Policy) Validate() error {
	if p.MaxSize <= 0 {
		return fmt.Errorf("containerLogMaxSize: %d bytes must be positive", p.MaxSize)
	}
	if p.MaxFiles < 2 {
		return fmt.Errorf("containerLogMaxFiles: %d must be at least 2", p.MaxFiles)
	}
	return nil
}

// Manager rotates the logs of the containers of one runtime. Create with New.
type Manager struct {
	rt     Runtime
	policy Policy
	log    *slog.Logger
	now    func() time.Time
}

// New returns a Manager for rt with policy (validated). A nil log means slog.Default().
func New(rt Runtime, policy Policy, log *slog.Logger) (*Manager, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Manager{rt: rt, policy: policy, log: log, now: time.Now}, nil
}

// Run calls RotateAll every interval until ctx ends.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.RotateAll(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("container log rotation", "err", err)
		}
	}
}

// RotateAll rotates the log of every running container that reached MaxSize. A failure for one
// container does not stop the others; the errors are joined.
func (m *Manager) RotateAll(ctx context.Context) error {
	resp, err := m.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range resp.GetContainers() {
		if err := m.rotateContainer(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("container %s (%s): %w", c.GetMetadata().GetName(), c.GetId(), err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) rotateContainer(ctx context.Context, c *runtimeapi.Container) error {
	st, err := m.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		return nil
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		// Removed behind the runtime's back: have it write a new file.
		if _, err := m.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: c.GetId()}); err != nil {
			return fmt.Errorf("log %s missing, reopen: %w", path, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if info.Size() < m.policy.MaxSize {
		return nil
	}
	rotated, err := m.rotate(ctx, c.GetId(), path)
	if err != nil {
		return err
	}
	if rotated != "" {
		m.log.Info("container log rotated", "pod", c.GetLabels()["io.kubernetes.pod.namespace"]+"/"+c.GetLabels()["io.kubernetes.pod.name"],
			"container", c.GetMetadata().GetName(), "log", path, "size", info.Size(), "rotatedTo", rotated)
	}
	return nil
}

// rotate prunes and compresses the older rotated files of log, then renames log and has the runtime
// reopen it. It returns the rotated file's name ("" when a file of this second already exists: the
// rotation waits for the next round rather than overwrite it).
func (m *Manager) rotate(ctx context.Context, id, log string) (string, error) {
	rotated := log + "." + m.now().Format(timestampFormat)
	if _, err := os.Stat(rotated); err == nil {
		return "", nil
	}
	olds, err := filepath.Glob(globEscape(log) + ".*")
	if err != nil {
		return "", err
	}
	if olds, err = removeUnused(olds); err != nil {
		return "", err
	}
	sort.Strings(olds) // the stamp sorts oldest first
	// After this rotation there are the live file, the new rotated one and MaxFiles-2 older ones.
	keep := max(m.policy.MaxFiles-2, 0)
	for len(olds) > keep {
		if err := os.Remove(olds[0]); err != nil {
			return "", fmt.Errorf("remove old log: %w", err)
		}
		olds = olds[1:]
	}
	for _, l := range olds {
		if !strings.HasSuffix(l, compressSuffix) {
			if err := compress(l); err != nil {
				return "", err
			}
		}
	}
	if err := os.Rename(log, rotated); err != nil {
		return "", fmt.Errorf("rotate: %w", err)
	}
	if _, err := m.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		// Put it back so the next round tries again (upstream does the same).
		if rerr := os.Rename(rotated, log); rerr != nil {
			m.log.Error("container log: cannot rename the rotated file back", "log", log, "rotated", rotated, "err", rerr)
		}
		return "", fmt.Errorf("reopen container log: %w", err)
	}
	return rotated, nil
}

// removeUnused removes what an interrupted rotation left (temporary files, and uncompressed files whose
// .gz exists) and returns the rest.
func removeUnused(logs []string) ([]string, error) {
	set := map[string]bool{}
	for _, l := range logs {
		set[l] = true
	}
	var keep []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || (!strings.HasSuffix(l, compressSuffix) && set[l+compressSuffix]) {
			if err := os.Remove(l); err != nil {
				return nil, fmt.Errorf("remove unused log: %w", err)
			}
			continue
		}
		keep = append(keep, l)
	}
	return keep, nil
}

// compress gzips log to log.gz (through log.gz.tmp) and removes log.
func compress(log string) (err error) {
	in, err := os.Open(log)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := log + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	w := gzip.NewWriter(out)
	if _, err = io.Copy(w, in); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err = w.Close(); err != nil {
		return err
	}
	if err = out.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, log+compressSuffix); err != nil {
		return err
	}
	return os.Remove(log)
}

// globEscape quotes the glob metacharacters of a path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
