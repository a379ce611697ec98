package containerd

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Version is a containerd release version (major.minor.patch) as reported by `containerd --version`.
type Version struct {
	Major, Minor, Patch int
	// Raw is the version field as printed, e.g. "1.6.20~ds1" or "v2.4.2".
	Raw string
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ConfigVersion is the config file schema this containerd reads natively: 2 for containerd 1.x, 3 for
// 2.0 to 2.2, 4 from 2.3 (containerd's RELEASES.md "Daemon Configuration" table). Versions 3 and 4 lay
// out the CRI plugins the same way ("io.containerd.cri.v1.runtime" / "io.containerd.cri.v1.images"); 4
// only renamed plugins nodekit does not configure, and writing it spares 2.3+ a migration at every start.
func (v Version) ConfigVersion() int {
	switch {
	case v.Major < 2:
		return 2
	case v.Major == 2 && v.Minor < 3:
		return 3
	default:
		return 4
	}
}

// ParseVersion parses the output of `containerd --version`, whose third field is the version:
//
//	containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3   (Debian)
//	containerd github.com/containerd/containerd v1.7.13 7c3aca7a610df76212171d200ca3811ff6096eb8
//	containerd github.com/containerd/containerd/v2 2.4.2+unknown                   (go install)
//
// A leading "v" and any suffix after the numeric part ("~ds1", "+unknown", "-rc.1") are ignored.
// Containerd older than 1.6 is rejected: nodekit needs CRI v1 (added in 1.5, default in 1.6).
func ParseVersion(out string) (Version, error) {
	fields := strings.Fields(out)
	if len(fields) < 3 || fields[0] != "containerd" {
		return Version{}, fmt.Errorf("containerd --version printed %q: want \"containerd <package> <version> ...\"", strings.TrimSpace(out))
	}
	raw := fields[2]
	s := strings.TrimPrefix(raw, "v")
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end >= 0 {
		s = s[:end]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("containerd version %q: want major.minor.patch", raw)
	}
	nums := [3]int{}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("containerd version %q: %q is not a number", raw, p)
		}
		nums[i] = n
	}
	v := Version{Major: nums[0], Minor: nums[1], Patch: nums[2], Raw: raw}
	if v.Major < 1 || (v.Major == 1 && v.Minor < 6) {
		return v, fmt.Errorf("containerd %s is too old: nodekit needs containerd >= 1.6 (CRI v1)", raw)
	}
	return v, nil
}

// DetectVersion runs `binary --version` (bounded to 10 s) and parses its output with ParseVersion.
func DetectVersion(ctx context.Context, binary string) (Version, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return Version{}, fmt.Errorf("%s --version: %w", binary, err)
	}
	return ParseVersion(string(out))
}
