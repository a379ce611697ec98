// Package sdnotify tells systemd about a component's lifecycle over the sd_notify(3) protocol: READY=1
// once the component is ready, STOPPING=1 when it stops. Nothing is sent when the process was not
// started under a Type=notify unit ($NOTIFY_SOCKET unset).
package sdnotify

import (
	"context"
	"log/slog"
	"net"
	"os"
)

// socket is $NOTIFY_SOCKET as this process started with it; the variable is taken out of the
// environment when this package is initialised (before any command runs), so that nobody else speaks
// for the component: k8s.io/apiserver's GenericAPIServer sends READY=1 as soon as it listens, before its
// post-start hooks (namespaces, the kubernetes Service) are done and /readyz is ok, and children (the
// agent's managed containerd, `nodekit up`'s components) would announce their own readiness as ours.
var socket = func() string {
	s := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return s
}()

// Notify sends READY=1 once ready is closed and STOPPING=1 once ctx ends, each logged with the
// component's name (a failed send is a warning). It returns at once; the messages are sent from its own
// goroutine. Without $NOTIFY_SOCKET it does nothing.
func Notify(ctx context.Context, component string, ready <-chan struct{}) {
	if socket == "" {
		return
	}
	send := func(state string) {
		if err := Send(socket, state); err != nil {
			slog.Warn("sd_notify failed", "component", component, "state", state, "socket", socket, "err", err)
			return
		}
		slog.Info("sd_notify sent", "component", component, "state", state)
	}
	go func() {
		select {
		case <-ready:
			send("READY=1")
		case <-ctx.Done():
		}
		<-ctx.Done()
		send("STOPPING=1")
	}()
}

// Send sends one sd_notify datagram (newline-separated VAR=value assignments) to socket, a path or,
// with a leading '@', a Linux abstract socket name (which Go's net package maps to the leading NUL).
func Send(socket, state string) error {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state + "\n"))
	return err
}
