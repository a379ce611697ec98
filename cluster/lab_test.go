package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestParentPID(t *testing.T) {
	if got, want := parentPID(os.Getpid()), os.Getppid(); got != want {
		t.Errorf("parentPID(self) = %d, want %d", got, want)
	}
}

// TestWaitProcessesGone: a process naming the dir is reported until it exits; this process, which
// names the dir in nothing, and processes naming a longer sibling path are not.
func TestWaitProcessesGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	// The shell keeps its arguments on its command line (the trailing ':' stops it exec'ing sleep).
	other := exec.Command("sh", "-c", "sleep 30; :", "sh", dir+"2/x") // a sibling path, not under dir
	user := exec.Command("sh", "-c", "sleep 30; :", "sh", dir+"/nodes/n1")
	for _, c := range []*exec.Cmd{other, user} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		// /proc/<pid>/cmdline may still be empty right after the exec.
		for i := 0; i < 100; i++ {
			if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.Process.Pid), "cmdline")); len(b) > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if left := waitProcessesGone(dir, 300*time.Millisecond); !slices.Equal(left, []int{user.Process.Pid}) {
		t.Fatalf("left = %v, want [%d]", left, user.Process.Pid)
	}
	go func() { time.Sleep(300 * time.Millisecond); _ = user.Process.Kill(); _ = user.Wait() }()
	if left := waitProcessesGone(dir, 5*time.Second); len(left) != 0 {
		t.Fatalf("left = %v after the process exited", left)
	}
}
