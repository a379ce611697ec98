package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestSend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := Send(path, "READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := l.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1\n" {
		t.Fatalf("received %q, %v; want \"READY=1\\n\"", buf[:n], err)
	}
	if err := Send(filepath.Join(t.TempDir(), "absent.sock"), "READY=1"); err == nil {
		t.Error("Send to a missing socket: no error")
	}
}
