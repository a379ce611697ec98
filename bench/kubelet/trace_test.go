package kubelet_bench

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// traceLine matches the child's text log lines: time, message and the pod they are about.
var traceLine = regexp.MustCompile(`^time=(\S+) level=\S+ msg=("(?:[^"\\]|\\.)*"|\S+).*? pod=(\S+)(.*)$`)

// traceSteps are the steps of a pod's start the child logs at debug level, in order, each found by its
// message and an attribute it must carry; offsets are from the pod's first sync.
var traceSteps = []struct{ name, msg, attr string }{
	{"volumes set up", "volumes set up", ""},
	{"sandbox created", "sandbox created", ""},
	{"container started", "container started", ""},
	{"first probe run", "probe ran", ""},
	{"status written Running", "pod status written", "phase=Running"},
	{"probe passed", "probe result changed", "result=Success"},
	{"status written Ready", "pod status written", "ready=true"},
}

// printSteps reads the trace file and prints, for the pods whose names start with prefix, the p50 and
// p99 of each step's offset from the pod's first sync.
func printSteps(path, prefix string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	first := map[string]map[string]time.Time{} // pod → step → first time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[3], "default/"+prefix) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		msg, rest := strings.Trim(m[2], `"`), m[4]
		steps := first[m[3]]
		if steps == nil {
			steps = map[string]time.Time{}
			first[m[3]] = steps
		}
		mark := func(name string) {
			if _, ok := steps[name]; !ok {
				steps[name] = at
			}
		}
		if msg == "sync pod" {
			mark("sync")
		}
		for _, s := range traceSteps {
			if msg == s.msg && strings.Contains(rest, s.attr) {
				mark(s.name)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Printf("steps of the %s pods' starts, from the kubelet's first sync of the pod (p50 / p99 of %d pods):\n", prefix, len(first))
	for _, s := range traceSteps {
		var d []time.Duration
		for _, steps := range first {
			if t, ok := steps[s.name]; ok && !steps["sync"].IsZero() {
				d = append(d, t.Sub(steps["sync"]))
			}
		}
		if len(d) == 0 {
			continue
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Printf("  %-24s %10v %10v\n", s.name, r(pct(d, .5)), r(pct(d, .99)))
	}
	return nil
}
