// Package components is the record of a control-plane or node component process that nodekit runs
// directly on a host (not in a container): its name, PID, start time, restart count, command line and
// log file, one JSON file per component in a directory of the node (<data-dir>/components). The server
// writes etcd's, the API server's, the scheduler's and the controller manager's; the agent writes its
// service proxy's; the co-located kubelet reads the directory as a pod source and publishes one mirror
// pod per record in kube-system (kubelet/processpods), serving `kubectl logs` from the record's log file.
//
// The directory is trusted configuration of the host, as the static pod directory is: Read accepts it
// and its files only when they are owned by this process's user and writable by no one else, so a record
// (and with it the log file the kubelet serves) can only come from a process as privileged as the reader.
package components

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The component names, upstream's (the mirror pod of a record is <Name>-<node>).
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
	Proxy             = "kube-proxy"
)

// Record describes one component process.
type Record struct {
	// Name is the component's name (one of the constants; a file name's safe characters only).
	Name string `json:"name"`
	// PID is the process's ID; StartTime when it started.
	PID       int       `json:"pid"`
	StartTime time.Time `json:"startTime"`
	// Restarts counts the times the component was started again after an earlier process of it (on
	// this data dir) exited: its mirror pod's restartCount.
	Restarts int32 `json:"restarts"`
	// Command is the process's command line.
	Command []string `json:"command,omitempty"`
	// LogFile is the absolute path of the file the process's log lines go to; empty: none.
	LogFile string `json:"logFile,omitempty"`
}

const suffix = ".json"

func path(dir, name string) string { return filepath.Join(dir, name+suffix) }

func validName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\\.") || len(name) > 63 {
		return fmt.Errorf("component record: name %q must be a non-empty DNS label", name)
	}
	return nil
}

// Started records that component name runs as process pid since start, with its command line and log
// file, in dir (created 0700 if missing). Restarts is the previous record's plus one when a previous
// record of another process exists, else 0. The file is replaced atomically; the record is returned.
func Started(dir, name string, pid int, start time.Time, command []string, logFile string) (Record, error) {
	if err := validName(name); err != nil {
		return Record{}, err
	}
	r := Record{Name: name, PID: pid, StartTime: start.UTC().Truncate(time.Second), Command: command, LogFile: logFile}
	if old, err := readFile(path(dir, name)); err == nil && old.PID != pid {
		r.Restarts = old.Restarts + 1
	} else if err == nil {
		r.Restarts = old.Restarts
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Record{}, fmt.Errorf("component record %s: %w", name, err)
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return Record{}, fmt.Errorf("component record %s: %w", name, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return Record{}, fmt.Errorf("component record %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path(dir, name)); err != nil {
		_ = os.Remove(tmp.Name())
		return Record{}, fmt.Errorf("component record %s: %w", name, err)
	}
	return r, nil
}

// Remove deletes component name's record (the component is no longer run on this node, e.g. etcd
// moved to external servers). A missing record is not an error.
func Remove(dir, name string) error {
	if err := os.Remove(path(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Read returns the records of dir sorted by name, and one error per file it refused (naming it). A
// missing dir gives none. dir itself must be a directory owned by this process's user and writable by
// no one else, and so must each record file (see the package doc); otherwise nothing is read from it.
func Read(dir string) ([]Record, []error) {
	if err := trusted(dir, true); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("component records: %w", err)}
	}
	var recs []Record
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := trusted(p, false); err != nil {
			errs = append(errs, err)
			continue
		}
		r, err := readFile(p)
		switch {
		case err != nil:
			errs = append(errs, err)
		case r.Name != name:
			errs = append(errs, fmt.Errorf("component record %s: name %q does not match the file name", p, r.Name))
		case r.PID <= 0:
			errs = append(errs, fmt.Errorf("component record %s: pid %d is not a process ID", p, r.PID))
		case r.LogFile != "" && !filepath.IsAbs(r.LogFile):
			errs = append(errs, fmt.Errorf("component record %s: logFile %q is not an absolute path", p, r.LogFile))
		default:
			recs = append(recs, r)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, errs
}

func readFile(p string) (Record, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("component record %s: %w", p, err)
	}
	return r, validName(r.Name)
}

// trusted checks that p (a directory when dir, else a regular file, not a symlink) is owned by this
// process's effective user and not writable by group or others.
func trusted(p string, dir bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("component records: %s is not a %s", p, map[bool]string{true: "directory", false: "regular file"}[dir])
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("component records: %s is not owned by uid %d; refused", p, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("component records: %s is writable by group or others (mode %v); refused", p, fi.Mode().Perm())
	}
	return nil
}

// Alive reports whether r's process still runs: /proc has its PID and it is not a zombie.
func (r Record) Alive() bool {
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(r.PID), "stat"))
	if err != nil {
		return false
	}
	// Fields after the command (in parentheses, which may contain spaces): state is the first.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
