// Package pagetrim drops the resident pages of the running executable's read-only mappings (its code,
// read-only data and pclntab) from the process, so that its resident set holds only the parts of the
// binary it goes on using.
//
// A Go program maps its whole executable; every page it touched stays mapped, and counts in its VmRSS,
// until it exits. nodekit is one binary with the control plane in it: `nodekit agent` runs the
// package initialisers of everything it links (the API server's, etcd's, ...) and its start-up code once,
// and those pages stay resident although the agent never runs them again. Dropping the mappings' pages
// (madvise MADV_DONTNEED) after start-up leaves the file's pages in the page cache; the ones the process
// still uses fault back in on their next use (minor faults, no I/O), the others stay out.
//
// Only mappings of the executable file that are not writable and hold no private (copy-on-write) pages
// are touched, so no modified data is ever discarded.
package pagetrim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapping is one line of /proc/self/smaps with the counters Executable needs.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
	rssKiB     int64
	anonKiB    int64
}

// Executable drops the resident pages of the executable's read-only, file-backed mappings of this
// process and returns how many KiB were resident in them before. It fails only when /proc/self/smaps
// cannot be read or madvise refuses (the error names the mapping).
func Executable() (droppedKiB int64, err error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := readSmaps("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	for _, m := range maps {
		if m.path != exe || strings.Contains(m.perms, "w") || m.anonKiB != 0 || m.rssKiB == 0 {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return droppedKiB, fmt.Errorf("madvise %x-%x %s %s: %w", m.start, m.end, m.perms, m.path, errno)
		}
		droppedKiB += m.rssKiB
	}
	return droppedKiB, nil
}

// readSmaps parses the smaps file at path into its mappings.
func readSmaps(path string) ([]mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header: start-end perms offset dev inode [path]
			lo, hi, ok := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: bad mapping line %q", path, sc.Text())
			}
			m := mapping{start: uintptr(start), end: uintptr(end), perms: fields[1]}
			if len(fields) >= 6 {
				m.path = fields[5]
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			out[len(out)-1].rssKiB = v
		case "Anonymous:":
			out[len(out)-1].anonKiB = v
		}
	}
	return out, sc.Err()
}
