package up

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodekit/nodekit/cluster"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

// labRun is a `nodekit lab up` child of a test, on names, subnets and ports of its own.
type labRun struct {
	t                *testing.T
	nodekit, dataDir string
	// pathEnv puts the NODEKIT_CONTAINERD directory first on PATH for agents the test starts itself.
	pathEnv     []string
	cmd         *exec.Cmd
	out, errb   *syncBuffer
	exited      chan struct{}
	downDone    bool
	beforeDown  []func() // run by down first (e.g. thaw a frozen agent, stop the test's own agents)
	extraOnFail func()   // more to log when the test failed
}

// startLab runs `nodekit lab up --nodes nodes --join-nodes join` under a fresh temporary data dir and
// waits (up to 6 minutes) for its summary. Cleanup logs the components' logs on failure, then runs down.
// The lab's names, subnet, ports and CIDRs are random unless extra (more flags, after the others) sets
// them.
func startLab(t *testing.T, prefix string, nodes, join int, extra ...string) *labRun {
	t.Helper()
	bin := binaries(t)
	images := ctrfw.ImagesDir(t)
	base, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	// Every node's kubelet runs on the harness settings (no image GC, memory.available only): the
	// host's disk fill is not the test's subject and must not taint the lab's nodes.
	kubeletConfig, err := fwagent.WriteKubeletConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	l := &labRun{t: t, nodekit: filepath.Join(bin, "nodekit"), dataDir: filepath.Join(base, "lab"), out: &syncBuffer{}, errb: &syncBuffer{},
		exited: make(chan struct{})}
	args := []string{"lab", "up", "--data-dir", l.dataDir, "--nodes", strconv.Itoa(nodes), "--join-nodes", strconv.Itoa(join),
		"--prefix", fmt.Sprintf("%s%d", prefix, rand.IntN(1000)), "--subnet", fmt.Sprintf("172.31.%d.0/24", rand.IntN(250)+1),
		"--secure-port", strconv.Itoa(freePort(t)), "--etcd-listen-client", "127.0.0.1:" + strconv.Itoa(freePort(t)),
		"--cluster-cidr", fmt.Sprintf("10.%d.0.0/16", 150+rand.IntN(70)),
		"--service-cluster-ip-range", fmt.Sprintf("10.%d.%d.0/24", 100+rand.IntN(50), rand.IntN(250)),
		"--images-dir", images, "--kubelet-config", kubeletConfig, "--component-log-level", "error"}
	args = append(args, extra...)
	if c := os.Getenv("NODEKIT_CONTAINERD"); c != "" {
		args = append(args, "--containerd", c)
		l.pathEnv = []string{"PATH=" + filepath.Dir(c) + string(os.PathListSeparator) + os.Getenv("PATH")}
	}
	l.cmd = exec.Command(l.nodekit, args...)
	l.cmd.Stdout, l.cmd.Stderr = l.out, l.errb
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.cmd.Wait(); close(l.exited) }()
	t.Cleanup(func() {
		if t.Failed() {
			l.dumpLogs()
		}
		l.down()
		os.RemoveAll(base)
	})
	deadline := time.Now().Add(6 * time.Minute)
	for !strings.Contains(l.out.String(), "nodekit lab is up") {
		select {
		case <-l.exited:
			t.Fatalf("nodekit lab up exited: stdout:\n%s", l.out.String())
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatal("nodekit lab up printed no summary within 6m")
		}
	}
	t.Logf("lab up:\n%s", l.out.String())
	return l
}

func (l *labRun) dumpLogs() {
	logs, _ := filepath.Glob(cluster.LayoutOf(l.dataDir).LogFile("*"))
	for _, f := range logs {
		if b, err := os.ReadFile(f); err == nil {
			l.t.Logf("--- %s (last 30 lines)\n%s", filepath.Base(f), tail(string(b), 30))
		}
	}
	l.t.Logf("lab up stderr:\n%s", tail(l.errb.String(), 30))
	if l.extraOnFail != nil {
		l.extraOnFail()
	}
}

// down runs the beforeDown hooks and `nodekit lab down`, and waits for `lab up` to exit; once.
func (l *labRun) down() {
	if l.downDone {
		return
	}
	l.downDone = true
	for _, f := range l.beforeDown {
		f()
	}
	if o, err := exec.Command(l.nodekit, "lab", "--data-dir", l.dataDir, "down").CombinedOutput(); err != nil {
		l.t.Errorf("nodekit lab down: %v\n%s", err, tail(string(o), 40))
	}
	select {
	case <-l.exited:
	case <-time.After(time.Minute):
		l.t.Errorf("nodekit lab up still runs after lab down")
		_ = l.cmd.Process.Kill()
	}
}

// downAndAssertGone runs down and checks that no namespace, interface, bridge, process naming the lab's
// data dir, or data dir is left.
func (l *labRun) downAndAssertGone(st cluster.LabState) {
	t := l.t
	l.down()
	for _, n := range st.Nodes {
		if _, err := os.Stat("/run/netns/" + n.Netns); err == nil {
			t.Errorf("netns %s left", n.Netns)
		}
		if exec.Command("ip", "link", "show", n.HostIf).Run() == nil {
			t.Errorf("interface %s left", n.HostIf)
		}
	}
	if exec.Command("ip", "link", "show", st.Bridge).Run() == nil {
		t.Errorf("lab bridge %s left", st.Bridge)
	}
	if left := (&env{dataDir: l.dataDir}).processesUsingDataDir(); len(left) > 0 {
		t.Errorf("processes naming the lab's data dir after lab down: %v", left)
	}
	if _, err := os.Stat(l.dataDir); !os.IsNotExist(err) {
		t.Errorf("lab data dir still exists (%v)", err)
	}
}
