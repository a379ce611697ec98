package up

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodekit/nodekit/controlplane/etcd"
	"github.com/nodekit/nodekit/server"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

// labStep is one ```sh block of a docs/labs file and the ```expect block after it (if any): each expect
// line is a regular expression that must match a line of the block's output, in order.
type labStep struct {
	line   int // of the ```sh fence, for messages
	script string
	expect []*regexp.Regexp
}

// parseLab reads the fenced ```sh and ```expect blocks of one lab. An expect block belongs to the sh
// block before it; an expect block with no sh block before it, or an unterminated fence, is an error.
func parseLab(path string) ([]labStep, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var steps []labStep
	var kind string
	var body []string
	start := 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case kind == "" && (line == "```sh" || line == "```expect"):
			kind, body, start = strings.TrimPrefix(line, "```"), nil, n
		case kind != "" && line == "```":
			if kind == "sh" {
				steps = append(steps, labStep{line: start, script: strings.Join(body, "\n") + "\n"})
			} else {
				if len(steps) == 0 || steps[len(steps)-1].expect != nil {
					return nil, fmt.Errorf("%s:%d: expect block without a sh block before it", path, start)
				}
				for _, l := range body {
					if strings.TrimSpace(l) == "" {
						continue
					}
					re, err := regexp.Compile(l)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: expect line %q: %w", path, start, l, err)
					}
					steps[len(steps)-1].expect = append(steps[len(steps)-1].expect, re)
				}
			}
			kind = ""
		case kind != "":
			body = append(body, line)
		}
	}
	if kind != "" {
		return nil, fmt.Errorf("%s:%d: unterminated ```%s block", path, start, kind)
	}
	return steps, sc.Err()
}

// matchInOrder returns the first expectation that no line of out matches after the previous match.
func matchInOrder(out string, expect []*regexp.Regexp) *regexp.Regexp {
	lines := strings.Split(out, "\n")
	i := 0
	for _, re := range expect {
		for i < len(lines) && !re.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			return re
		}
		i++
	}
	return nil
}

// selectLabs keeps the labs whose file names start with one of the comma-separated numbers in filter
// ("10,11"; "7" and "07" are the same lab); an empty filter keeps all. A number that names no lab is an
// error, so that a typo does not pass by running nothing.
func selectLabs(labs []string, filter string) ([]string, error) {
	if strings.TrimSpace(filter) == "" {
		return labs, nil
	}
	var kept []string
	for _, f := range strings.Split(filter, ",") {
		want, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("LABS=%q: %q is not a lab number", filter, f)
		}
		found := false
		for _, l := range labs {
			name := filepath.Base(l)
			digits := name[:strings.IndexFunc(name, func(r rune) bool { return r < '0' || r > '9' })]
			if n, err := strconv.Atoi(digits); err == nil && n == want {
				kept, found = append(kept, l), true
			}
		}
		if !found {
			return nil, fmt.Errorf("LABS=%q: no lab numbered %d in docs/labs", filter, want)
		}
	}
	return kept, nil
}

func TestSelectLabs(t *testing.T) {
	labs := []string{"/d/01-etcd.md", "/d/07-service-proxy.md", "/d/10-access-control.md", "/d/11-dns.md"}
	if got, err := selectLabs(labs, ""); err != nil || len(got) != 4 {
		t.Errorf("no filter: %v, %v", got, err)
	}
	if got, err := selectLabs(labs, "10, 11"); err != nil || strings.Join(got, " ") != "/d/10-access-control.md /d/11-dns.md" {
		t.Errorf("10,11: %v, %v", got, err)
	}
	if got, err := selectLabs(labs, "7"); err != nil || strings.Join(got, " ") != "/d/07-service-proxy.md" {
		t.Errorf("7: %v, %v", got, err)
	}
	if _, err := selectLabs(labs, "12"); err == nil || !strings.Contains(err.Error(), "no lab numbered 12") {
		t.Errorf("12: err = %v", err)
	}
	if _, err := selectLabs(labs, "x"); err == nil || !strings.Contains(err.Error(), "not a lab number") {
		t.Errorf("x: err = %v", err)
	}
}

func TestParseLab(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lab.md")
	os.WriteFile(p, []byte("# x\n```sh\necho a\necho b\n```\n\n```expect\n^a$\n^b$\n```\n```sh\ntrue\n```\n"), 0o644)
	steps, err := parseLab(p)
	if err != nil || len(steps) != 2 || steps[0].script != "echo a\necho b\n" || len(steps[0].expect) != 2 || steps[1].expect != nil {
		t.Fatalf("parseLab = %+v, %v", steps, err)
	}
	if re := matchInOrder("a\nb\n", steps[0].expect); re != nil {
		t.Errorf("a, b: %v unmatched", re)
	}
	if re := matchInOrder("b\na\n", steps[0].expect); re == nil || re.String() != "^b$" {
		t.Errorf("b, a: want ^b$ unmatched (order), got %v", re)
	}
	os.WriteFile(p, []byte("```expect\nx\n```\n"), 0o644)
	if _, err := parseLab(p); err == nil || !strings.Contains(err.Error(), "without a sh block") {
		t.Errorf("lone expect block: err = %v", err)
	}
	os.WriteFile(p, []byte("```sh\nx\n"), 0o644)
	if _, err := parseLab(p); err == nil || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("open fence: err = %v", err)
	}
}

// TestLabs brings up one cluster with `nodekit up` and runs every docs/labs/*.md in name order: each sh
// block in bash -e with the environment the labs' README sets up (DATA_DIR, KUBECONFIG,
// ETCDCTL_ENDPOINTS and the etcd client TLS files (ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY), LAB_TMP, LAB_DATA_DIR and LAB_UP_FLAGS for a lab's own `nodekit lab up`, nodekit
// first in PATH), its output matched against the expect block. LABS=10,11 (a comma-separated list of lab
// numbers, the file names' leading digits) runs only those labs; unset or empty runs them all.
func TestLabs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nodekit up needs root (containerd, netns, iptables)")
	}
	_, file, _, _ := runtime.Caller(0)
	labs, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "labs", "[0-9]*.md"))
	if err != nil || len(labs) == 0 {
		t.Fatalf("no labs in docs/labs: %v", err)
	}
	if labs, err = selectLabs(labs, os.Getenv("LABS")); err != nil {
		t.Fatal(err)
	}
	parsed := map[string][]labStep{}
	for _, l := range labs {
		if parsed[l], err = parseLab(l); err != nil {
			t.Fatal(err)
		}
		if len(parsed[l]) == 0 {
			t.Fatalf("%s has no sh block", l)
		}
		for _, s := range parsed[l] {
			if len(s.expect) == 0 {
				t.Fatalf("%s:%d: sh block with no expect block: a lab step must say what to expect", l, s.line)
			}
		}
	}
	for _, tool := range []string{"kubectl", "etcdctl", "curl", "jq", "nft", "conntrack", "iptables-save", "nsenter", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the labs need %s: %v", tool, err)
		}
	}

	bin := binaries(t)
	e := newEnv(t, bin, ctrfw.ImagesDir(t))
	// Lab 11 resolves names through CoreDNS, which reads the API through the kubernetes Service: as in
	// TestUpDemoAndPurge, the API server binds every address (its endpoint must not be loopback) and
	// CoreDNS forwards nothing off this host.
	e.writeResolvConf(t)
	e.bindAddress = "0.0.0.0"
	e.startUp(t)
	client := e.client(t)
	e.waitDemoReady(t, client, 3, nil)
	// A lab that needs several nodes starts `nodekit lab up --data-dir $LAB_DATA_DIR $LAB_UP_FLAGS` itself
	// (on names, subnets and ports of this run); whatever it leaves is taken down here, also on failure.
	// The data dir is short: containerd's socket path must fit in sun_path.
	labBase, err := os.MkdirTemp("", "nklabs-")
	if err != nil {
		t.Fatal(err)
	}
	labData := filepath.Join(labBase, "lab")
	t.Cleanup(func() {
		if _, err := os.Stat(labData); err == nil {
			if out, err := exec.Command(filepath.Join(bin, "nodekit"), "lab", "--data-dir", labData, "down").CombinedOutput(); err != nil {
				t.Errorf("nodekit lab down: %v\n%s", err, out)
			}
		}
		os.RemoveAll(labBase)
	})
	labFlags := []string{"--prefix", fmt.Sprintf("nkls%d", rand.IntN(1000)), "--subnet", fmt.Sprintf("172.31.%d.0/24", rand.IntN(250)+1),
		"--secure-port", strconv.Itoa(freePort(t)), "--etcd-listen-client", "127.0.0.1:" + strconv.Itoa(freePort(t)),
		"--cluster-cidr", fmt.Sprintf("10.%d.0.0/16", 150+rand.IntN(50)),
		"--service-cluster-ip-range", fmt.Sprintf("10.%d.%d.0/24", 100+rand.IntN(50), rand.IntN(250)),
		"--images-dir", e.images, "--kubelet-config", e.kubeletConfig, "--component-log-level", "error"}
	if e.containerd != "" {
		labFlags = append(labFlags, "--containerd", e.containerd)
	}
	etcdCA, etcdCert, etcdKey := etcd.ClientFiles(server.Config{DataDir: e.dataDir}.Paths().PKIDir)
	env := append(os.Environ(), "DATA_DIR="+e.dataDir, "KUBECONFIG="+server.Config{DataDir: e.dataDir}.Paths().AdminKubeconfig,
		"ETCDCTL_API=3", "ETCDCTL_ENDPOINTS=https://"+e.etcdAddr, "ETCDCTL_CACERT="+etcdCA, "ETCDCTL_CERT="+etcdCert,
		"ETCDCTL_KEY="+etcdKey, "LAB_TMP="+t.TempDir(),
		"LAB_DATA_DIR="+labData, "LAB_UP_FLAGS="+strings.Join(labFlags, " "),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	for _, l := range labs {
		name := filepath.Base(l)
		t.Run(strings.TrimSuffix(name, ".md"), func(t *testing.T) {
			for _, s := range parsed[l] {
				start := time.Now()
				cmd := exec.Command("bash", "-e", "-c", s.script)
				cmd.Env = env
				// Its own process group, so that a step over its bound is ended with all it started.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.WaitDelay = 5 * time.Second
				timer := time.AfterFunc(3*time.Minute, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
				out, err := cmd.CombinedOutput()
				timer.Stop()
				t.Logf("%s:%d (%s):\n%s", name, s.line, time.Since(start).Round(100*time.Millisecond), out)
				if err != nil {
					t.Fatalf("%s:%d: %v\nscript:\n%s", name, s.line, err, s.script)
				}
				if re := matchInOrder(string(out), s.expect); re != nil {
					t.Fatalf("%s:%d: no output line matches %q (in order)\noutput:\n%s", name, s.line, re, out)
				}
			}
		})
	}
}
