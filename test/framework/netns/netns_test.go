package netns

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLabNodesTalkAndCleanUp(t *testing.T) {
	lab, err := New(Options{Subnet: "10.198.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lab.Close() })
	a, err := lab.AddNode("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := lab.AddNode("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.IP.String() != "10.198.0.2" || b.IP.String() != "10.198.0.3" {
		t.Fatalf("node IPs %s %s", a.IP, b.IP)
	}
	l, err := Listen(b.NS, "tcp", net.JoinHostPort(b.IP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go ServeEcho(l)
	if err := Echo(a.NS, l.Addr().String(), 5*time.Second); err != nil {
		t.Fatalf("node a -> node b: %v", err)
	}
	// The host cannot reach the lab: it is isolated in its own namespaces.
	if err := Echo(nil, l.Addr().String(), 300*time.Millisecond); err == nil {
		t.Errorf("the host reached a lab node")
	}
	out, err := a.Command(context.Background(), "ip", "-o", "addr", "show", "eth0").Output()
	if err != nil || !strings.Contains(string(out), "10.198.0.2/24") {
		t.Errorf("process in node a sees eth0 %q (%v)", out, err)
	}
	pod, err := lab.NewPodNS()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{lab.Hub.Path(), a.NS.Path(), b.NS.Path(), pod.Path()}
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Close (%v)", p, err)
		}
	}
	if err := lab.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
