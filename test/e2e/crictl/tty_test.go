package crictl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/crictl"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

// openPTY opens a pseudo-terminal pair (/dev/ptmx and its /dev/pts/N).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// runStderrTTY runs crictl args with an empty stdin and stderr on a pseudo-terminal (where pull and load
// draw their progress), failing the test if the command fails. It returns stdout, and termShows, which
// waits up to 5s for the terminal's text to match re and reports whether it did with that text.
func (c cli) runStderrTTY(args ...string) (stdout string, termShows func(re *regexp.Regexp) (bool, string)) {
	c.t.Helper()
	master, slave := openPTY(c.t)
	term := &syncBuffer{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			term.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	var out bytes.Buffer
	if err := crictl.Run(context.Background(), append([]string{"-r", c.ep}, args...), strings.NewReader(""), &out, slave); err != nil {
		c.t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out.String(), func(re *regexp.Regexp) (bool, string) {
		for end := time.Now().Add(5 * time.Second); !re.MatchString(term.String()) && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
		text := term.String()
		return re.MatchString(text), text
	}
}

// TestExecTTY runs `exec -it CONTAINER sh` on a pseudo-terminal: crictl puts the terminal in raw mode,
// sends its size, and the container's shell reads a command line typed on the terminal and runs it.
func TestExecTTY(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	pod := rt.RunDemoPod(t, "tty-"+suffix())
	master, slave := openPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- crictl.Run(ctx, []string{"-r", rt.Endpoint(), "-t", "60s", "exec", "-it", pod.ContainerID[:8], "sh"}, slave, slave, slave)
	}()
	out := &syncBuffer{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			out.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	// The shell reads one line: type a command once the session is up (raw mode set on our side).
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		if err == nil && st.Lflag&unix.ICANON == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("crictl never put the terminal in raw mode")
		}
	}
	time.Sleep(500 * time.Millisecond)
	master.Write([]byte("echo tty-works\r"))
	select {
	case err := <-done:
		var ee *crictl.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("exec -it: %v\noutput: %q", err, out.String())
		}
		if ee != nil {
			t.Errorf("exec -it sh exited %d, output %q", ee.Code, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("exec -it did not finish; output %q", out.String())
	}
	// The remote terminal echoes the typed line, then the shell's echo prints the word, each ending in
	// CRLF (onlcr): the word appears twice.
	printed := func() bool { return strings.Count(out.String(), "tty-works\r\n") >= 2 }
	for waitFor := time.Now().Add(5 * time.Second); !printed() && time.Now().Before(waitFor); {
		time.Sleep(50 * time.Millisecond)
	}
	if !printed() {
		t.Errorf("terminal output %q lacks the command's output", out.String())
	}
	// Raw mode is restored afterwards.
	if st, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS); err != nil || st.Lflag&unix.ICANON == 0 {
		t.Errorf("terminal left in raw mode after exec -it (%v)", err)
	}
}
