// Package crictl_bench compares `nodekit crictl` with upstream crictl v1.37.0 on the same private
// containerd holding 10 pods with a running container each: wall time per invocation of ps, pods and
// images, the binaries run alternately so machine load affects them alike. A third binary,
// cmd/crictl (only the crictl package linked), separates crictl's own cost from the start-up
// cost of the full nodekit binary.
//
//	bench/crictl/run.sh            # builds upstream crictl into /var/cache/nodekit once, then runs this
//	go test -bench . -benchtime 20x ./bench/crictl/
//
// Environment: NODEKIT_BIN (default: built from this tree), CRICTL_UPSTREAM (default
// /var/cache/nodekit/crictl-v1.37.0/crictl).
package crictl_bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/images/build"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

const defaultUpstream = "/var/cache/nodekit/crictl-v1.37.0/crictl"

func upstreamBinary(b *testing.B) string {
	p := os.Getenv("CRICTL_UPSTREAM")
	if p == "" {
		p = defaultUpstream
	}
	if _, err := os.Stat(p); err != nil {
		b.Skipf("upstream crictl not found at %s (run bench/crictl/run.sh, which builds it): %v", p, err)
	}
	return p
}

// goBuild builds a main package of this module into dir.
func goBuild(b *testing.B, dir, pkg, name string) string {
	mod, err := build.FindModuleDir(".")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// nodekitCrictl returns a `crictl` symlink to the nodekit binary (built from this tree unless
// NODEKIT_BIN names one), and the standalone crictl-only binary.
func nodekitCrictl(b *testing.B) (nodekit, standalone string) {
	bin := os.Getenv("NODEKIT_BIN")
	dir := b.TempDir()
	if bin == "" {
		bin = goBuild(b, dir, "./cmd/nodekit", "nodekit")
	}
	link := filepath.Join(dir, "crictl")
	if err := os.Symlink(bin, link); err != nil {
		b.Fatal(err)
	}
	return link, goBuild(b, dir, "./cmd/crictl", "crictl-standalone")
}

// runOnce runs one invocation and returns its wall time.
func runOnce(b *testing.B, bin, endpoint string, args ...string) time.Duration {
	cmd := exec.Command(bin, append([]string{"-r", endpoint, "-i", endpoint}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return d
}

func BenchmarkCrictl(b *testing.B) {
	upstream := upstreamBinary(b)
	nodekit, standalone := nodekitCrictl(b)
	rt := fw.Start(b, fw.Options{})
	for i := 0; i < 10; i++ {
		rt.RunDemoPod(b, fmt.Sprintf("bench-%d", i))
	}
	ep := rt.Endpoint()
	bins := []struct{ name, path string }{{"nodekit", nodekit}, {"standalone", standalone}, {"upstream", upstream}}
	// Every binary must see the same runtime state.
	for _, args := range [][]string{{"ps", "-q"}, {"pods", "-q"}, {"images", "-q"}} {
		want := -1
		for _, bin := range bins {
			out, err := exec.Command(bin.path, append([]string{"-r", ep}, args...)...).Output()
			if err != nil || lines(out) == 0 || (want >= 0 && lines(out) != want) {
				b.Fatalf("%s %v: %d lines (%v), want %d", bin.name, args, lines(out), err, want)
			}
			want = lines(out)
		}
	}
	summary := map[string]string{}
	for _, cmd := range []string{"ps", "pods", "images"} {
		b.Run(cmd, func(b *testing.B) {
			total := make([]time.Duration, len(bins))
			for i := range bins {
				runOnce(b, bins[i].path, ep, cmd) // warm the page cache
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range bins { // rotate the order so load drifts hit every binary alike
					k := (i + j) % len(bins)
					total[k] += runOnce(b, bins[k].path, ep, cmd)
				}
			}
			ms := make([]float64, len(bins))
			for i := range bins {
				ms[i] = float64(total[i].Microseconds()) / 1000 / float64(b.N)
				b.ReportMetric(ms[i], bins[i].name+"-ms/op")
			}
			b.ReportMetric(ms[0]/ms[2], "nodekit/upstream")
			b.ReportMetric(ms[1]/ms[2], "standalone/upstream")
			summary[cmd] = fmt.Sprintf("%-7s %9.1f %12.1f %10.1f %18.2f %21.2f   (n=%d)", cmd, ms[0], ms[1], ms[2], ms[0]/ms[2], ms[1]/ms[2], b.N)
		})
	}
	b.Logf("mean wall time per invocation (ms), 10 pods / 10 containers:\n%-7s %9s %12s %10s %18s %21s\n%s\n%s\n%s",
		"", "nodekit", "standalone", "upstream", "nodekit/upstream", "standalone/upstream", summary["ps"], summary["pods"], summary["images"])
}

func lines(b []byte) int { return len(strings.Fields(string(b))) }
