package logging

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/natefinch/lumberjack.v2"
)

// The rotation limits of every component log file nodekit writes (<data-dir>/logs/<component>.log:
// the server's own, its children's, the proxy's). When a write would take a file past MaxSizeMB
// megabytes, the file is renamed to <component>-<UTC time>.log next to it and a new one is started;
// the MaxBackups newest rotated files are kept and older ones removed, so a component's logs take at
// most (MaxBackups+1) × MaxSizeMB MB. These are the kubelet's defaults for container logs
// (containerLogMaxSize 10Mi, containerLogMaxFiles 5). Readers following the file (the kubelet's
// `kubectl logs -f` of the component pods) reopen it when it is replaced.
const (
	MaxSizeMB  = 10
	MaxBackups = 5
)

// RotatingFile returns a writer appending to the log file at path (created 0640, its directory 0750),
// rotated by size with MaxSizeMB and MaxBackups. It is safe for concurrent writes; each Write of at
// most MaxSizeMB lands in one file. Close closes the current file. Errors are those of creating the
// directory or the file.
func RotatingFile(path string) (*lumberjack.Logger, error) {
	return rotatingFile(path, MaxSizeMB, MaxBackups)
}

func rotatingFile(path string, maxSizeMB, maxBackups int) (*lumberjack.Logger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("log file %s: %w", path, err)
	}
	// lumberjack creates a missing file 0600 and keeps an existing file's mode across rotations.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log file %s: %w", path, err)
	}
	f.Close()
	return &lumberjack.Logger{Filename: path, MaxSize: maxSizeMB, MaxBackups: maxBackups}, nil
}
