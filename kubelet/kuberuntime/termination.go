package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/nodekit/nodekit/runtime/cri"
)

// Termination message limits, upstream's: at most MaxTerminationMessageLength bytes of the file (its
// tail), and for FallbackToLogsOnError at most MaxTerminationMessageLogLines lines and
// MaxTerminationMessageLogLength bytes of the log's end.
const (
	MaxTerminationMessageLength    = 4096
	MaxTerminationMessageLogLines  = 80
	MaxTerminationMessageLogLength = 2048
)

// terminationMessageMount creates the host file of one instance of c, <dir>/<random id> with mode
// 0666 (so a container running as any user can write it; the mode is set after creation so the umask
// does not narrow it), and returns its bind mount at c.terminationMessagePath (made absolute, as
// upstream does). It returns nil when c has no terminationMessagePath or dir is empty.
func terminationMessageMount(dir string, c *v1.Container) (*runtimeapi.Mount, error) {
	if dir == "" || c.TerminationMessagePath == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("container %q: termination message directory: %w", c.Name, err)
	}
	host := filepath.Join(dir, uuid.NewString())
	f, err := os.OpenFile(host, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return nil, fmt.Errorf("container %q: termination message file: %w", c.Name, err)
	}
	if err := errors.Join(f.Close(), os.Chmod(host, 0o666)); err != nil {
		_ = os.Remove(host)
		return nil, fmt.Errorf("container %q: termination message file: %w", c.Name, err)
	}
	return &runtimeapi.Mount{HostPath: host, ContainerPath: absContainerPath(c.TerminationMessagePath)}, nil
}

// absContainerPath is p as an absolute, clean path in the container (a relative path is taken from /).
func absContainerPath(p string) string { return filepath.Clean("/" + p) }

// terminationMessageFile is the host path of the termination message file of the container instance s
// describes: the CRI mount at its terminationMessagePath (from the container's annotations) whose host
// file is directly in the container's directory of this kubelet. "" when there is none.
func (m *Manager) terminationMessageFile(s *runtimeapi.ContainerStatus) string {
	path := s.Annotations[annotationTerminationMessage]
	if m.opts.PodContainerDir == nil || path == "" {
		return ""
	}
	dir := m.opts.PodContainerDir(types.UID(kubelettypes.GetPodUID(s.Labels)), kubelettypes.GetContainerName(s.Labels))
	for _, mt := range s.Mounts {
		if mt.ContainerPath == absContainerPath(path) && filepath.Dir(mt.HostPath) == dir {
			return mt.HostPath
		}
	}
	return ""
}

// terminationMessage is the message of an exited container instance, as upstream's kubelet builds it:
// the last MaxTerminationMessageLength bytes of its termination message file; with policy
// FallbackToLogsOnError, when that is empty and the container failed (non-zero exit), the end of its log
// (MaxTerminationMessageLogLines lines, at most MaxTerminationMessageLogLength bytes). A file that cannot
// be read gives an error message naming it.
func (m *Manager) terminationMessage(ctx context.Context, s *runtimeapi.ContainerStatus) string {
	fallback := v1.TerminationMessagePolicy(s.Annotations[annotationTerminationMsgPolicy]) == v1.TerminationMessageFallbackToLogsOnError &&
		s.ExitCode != 0 && s.Reason != "ContainerCannotRun"
	if host := m.terminationMessageFile(s); host != "" {
		msg, err := readTail(host, MaxTerminationMessageLength)
		switch {
		case err == nil && msg != "":
			return msg
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return fmt.Sprintf("Error on reading termination log %s: %v", host, err)
		}
	}
	if !fallback || s.LogPath == "" {
		return ""
	}
	return m.logTail(ctx, s)
}

// logTail is the end of the container's log (both streams, as written), for FallbackToLogsOnError.
func (m *Manager) logTail(ctx context.Context, s *runtimeapi.ContainerStatus) string {
	lines, limit := int64(MaxTerminationMessageLogLines), int64(MaxTerminationMessageLogLength)
	var buf bytes.Buffer
	err := cri.ReadLogs(ctx, s.LogPath, s.Id, &logs.LogOptions{TailLines: &lines, LimitBytes: &limit}, m.opts.Runtime, &buf, &buf)
	if err != nil && buf.Len() == 0 {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return buf.String()
}

// readTail reads the last max bytes of the file at path.
func readTail(path string, max int64) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return "", err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, max))
	return string(b), err
}

// removeTerminationMessageFile removes the termination message file of container id (before the
// container itself is removed); a container without one, or already gone, is fine.
func (m *Manager) removeTerminationMessageFile(ctx context.Context, id string) error {
	resp, err := m.opts.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("ContainerStatus %s: %w", id, err)
	}
	if host := m.terminationMessageFile(resp.GetStatus()); host != "" {
		if err := os.Remove(host); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
