// Package layering enforces nodekit's architecture (docs/architecture.md) on the real import graph:
// packages sit on floors and import only lower floors (or their own component on the same floor), the
// node side never reaches the control plane, the scheduler and controllers never reach storage, nothing
// imports cmd/, test/ or bench/, and no package imports its parent.
//
// TestLayering reads the graph with `go list` (production imports only: test files may use the shared
// harnesses in test/framework, which start a control plane); TestRulesCatchViolations feeds the same
// checker a graph with one violation of each rule, so a rule that silently stopped matching fails too.
package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/nodekit/nodekit"

// floors maps a path prefix (relative to the module, longest match wins) to its floor. A package may
// import a package on a lower floor, or one of its own component (same first path segment, or the
// same listed prefix) on the same floor.
var floors = map[string]int{
	"version":      0,
	"examples":     0,
	"internal":     0,
	"images":       1,
	"runtime":      1,
	"probes":       1,
	"cni":          1,
	"kubelet":      2,
	"proxy":        2,
	"podroutes":    2,
	"crictl":       2,
	"explain":      2,
	"controlplane": 2,
	"agent":        3,
	"server":       3,
	"cluster":      4,
	"cmd":          5,
	"test":         6,
	"bench":        6,
	"hack":         6,
}

// sameFloorAllowed lists the cross-component imports on one floor that the architecture allows:
// the runtime imports the bundled images it seeds a managed containerd with, and benchmarks use the
// test harnesses.
var sameFloorAllowed = map[[2]string]bool{
	{"runtime", "images"}: true,
	{"bench", "test"}:     true,
}

// never lists dependencies (transitive) a package subtree must not have, with the reason printed.
var never = []struct {
	from, to, why string
}{
	{"kubelet", "controlplane", "the node talks to the control plane only over the API"},
	{"proxy", "controlplane", "the node talks to the control plane only over the API"},
	{"podroutes", "controlplane", "the node talks to the control plane only over the API"},
	{"crictl", "controlplane", "the node talks to the control plane only over the API"},
	{"cni", "controlplane", "the node talks to the control plane only over the API"},
	{"runtime", "controlplane", "the runtime knows nothing of the control plane"},
	{"probes", "controlplane", "probes know nothing of the control plane"},
	{"agent", "controlplane", "the agent joins any conformant API server"},
	{"controlplane/scheduler", "controlplane/apiserver", "only the API server touches etcd"},
	{"controlplane/scheduler", "controlplane/etcd", "only the API server touches etcd"},
	{"controlplane/controllers", "controlplane/apiserver", "only the API server touches etcd"},
	{"controlplane/controllers", "controlplane/etcd", "only the API server touches etcd"},
	{"probes", "kubelet", "probes run one probe and know nothing of the kubelet"},
	{"runtime", "k8s.io/api", "the runtime knows nothing of Kubernetes objects"},
	{"runtime", "k8s.io/client-go", "the runtime knows nothing of Kubernetes objects"},
	{"cni", "k8s.io/client-go", "the CNI plugin is no API client"},
}

// pkg is one package of the graph: its module-relative path, direct imports and transitive deps
// (module-relative for nodekit's own, full import paths otherwise).
type pkg struct {
	path          string
	imports, deps []string
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

func own(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// under reports whether p is prefix or below it.
func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

// floorOf returns the floor and the component (the matched prefix) of a module-relative path.
func floorOf(p string) (floor int, component string, ok bool) {
	best := ""
	for prefix := range floors {
		if under(p, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return 0, "", false
	}
	return floors[best], best, true
}

// check returns one line per violation, sorted.
func check(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		f, comp, ok := floorOf(p.path)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: on no floor (add its folder to docs/architecture.md and this test)", p.path))
			continue
		}
		for _, imp := range p.imports {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // standard library
			}
			if !own(imp) {
				continue
			}
			ip := rel(imp)
			if under(ip, "cmd") {
				bad = append(bad, fmt.Sprintf("%s imports %s: nothing imports cmd/", p.path, ip))
				continue
			}
			if (under(ip, "test") || under(ip, "bench")) && !(under(p.path, "test") || under(p.path, "bench")) {
				bad = append(bad, fmt.Sprintf("%s imports %s: production code never imports test/ or bench/", p.path, ip))
				continue
			}
			if p.path != ip && under(p.path, ip) {
				bad = append(bad, fmt.Sprintf("%s imports %s: a child package never imports its parent", p.path, ip))
				continue
			}
			g, icomp, ok := floorOf(ip)
			if !ok {
				continue // reported as its own package
			}
			switch {
			case g < f:
			case g == f && (strings.SplitN(comp, "/", 2)[0] == strings.SplitN(icomp, "/", 2)[0] ||
				sameFloorAllowed[[2]string{strings.SplitN(comp, "/", 2)[0], strings.SplitN(icomp, "/", 2)[0]}]):
			default:
				bad = append(bad, fmt.Sprintf("%s (floor %d) imports %s (floor %d): a package imports only lower floors or its own component", p.path, f, ip, g))
			}
		}
		for _, n := range never {
			if !under(p.path, n.from) {
				continue
			}
			for _, d := range p.deps {
				target := d
				if own(d) {
					target = rel(d)
				}
				if under(target, n.to) {
					bad = append(bad, fmt.Sprintf("%s depends on %s: %s", p.path, target, n.why))
					break
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// load lists the module's packages with their production imports and deps.
func load(t *testing.T) []pkg {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		pkgs = append(pkgs, pkg{path: rel(cols[0]), imports: strings.Fields(cols[1]), deps: strings.Fields(cols[2])})
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	for _, v := range check(load(t)) {
		t.Error(v)
	}
}

// TestRulesCatchViolations proves each rule fires: a synthetic graph with one violation of each kind
// must yield exactly those lines.
func TestRulesCatchViolations(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		{path: "kubelet/prober", imports: []string{m("kubelet")}},
		{path: "kubelet/status", imports: []string{m("controlplane/apiserver/pki")}, deps: []string{m("controlplane/apiserver/pki")}},
		{path: "controlplane/scheduler", deps: []string{m("controlplane/controllers/podutil"), m("controlplane/etcd")}},
		{path: "probes", imports: []string{m("kubelet/qos")}, deps: []string{m("kubelet/qos")}},
		{path: "runtime/cri", deps: []string{"k8s.io/api/core/v1"}},
		{path: "cluster", imports: []string{m("cmd/nodekit")}},
		{path: "proxy", imports: []string{m("test/framework/netns"), m("kubelet/metrics")}},
		{path: "newthing"},
		// allowed edges: no line
		{path: "runtime/containerd", imports: []string{m("images"), m("runtime/cri"), "k8s.io/cri-api/pkg/apis/runtime/v1", "fmt"}},
		{path: "test/e2e/node", imports: []string{m("test/framework/apiserver"), m("controlplane/etcd"), m("agent")}},
	}
	want := []string{
		"cluster imports cmd/nodekit: nothing imports cmd/",
		"controlplane/scheduler depends on controlplane/etcd: only the API server touches etcd",
		"kubelet/prober imports kubelet: a child package never imports its parent",
		"kubelet/status (floor 2) imports controlplane/apiserver/pki (floor 2): a package imports only lower floors or its own component",
		"kubelet/status depends on controlplane/apiserver/pki: the node talks to the control plane only over the API",
		"newthing: on no floor (add its folder to docs/architecture.md and this test)",
		"probes (floor 1) imports kubelet/qos (floor 2): a package imports only lower floors or its own component",
		"probes depends on kubelet/qos: probes run one probe and know nothing of the kubelet",
		"proxy (floor 2) imports kubelet/metrics (floor 2): a package imports only lower floors or its own component",
		"proxy imports test/framework/netns: production code never imports test/ or bench/",
		"runtime/cri depends on k8s.io/api/core/v1: the runtime knows nothing of Kubernetes objects",
	}
	got := check(pkgs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
