package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPauseReapsAndExits runs the built pause binary as PID 1 of a new PID namespace, orphans a process
// into that namespace (nsenter + a shell that backgrounds `sleep` and exits), checks the orphan is
// reaped after it exits (no zombie child of pause remains), then sends SIGTERM and expects exit 0.
func TestPauseReapsAndExits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter not installed")
	}
	bin := filepath.Join(t.TempDir(), "pause")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	time.Sleep(100 * time.Millisecond)

	orphan := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-p", "--", "/bin/sh", "-c", "sleep 1 </dev/null >/dev/null 2>&1 & exit 0")
	if out, err := orphan.CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	// The orphaned sleep is now pause's child; once it exits pause must reap it.
	sawChild := false
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := children(pid)
		if len(kids) > 0 {
			sawChild = true
		}
		if sawChild && len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause (pid %d) children %v: saw orphan %v; want the orphan adopted then reaped", pid, kids, sawChild)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("pause after SIGTERM: %v, want exit 0", err)
	}
}

// children lists "pid:state" of the processes whose parent is ppid.
func children(ppid int) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var state, parent string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "State:"); ok {
				state = strings.Fields(v)[0]
			}
			if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
				parent = strings.TrimSpace(v)
			}
		}
		f.Close()
		if parent == strconv.Itoa(ppid) {
			out = append(out, e.Name()+":"+state)
		}
	}
	return out
}
