package main

import (
	"context"
	"log/slog"
	"net"
	"os"
)

// notifySocket is $NOTIFY_SOCKET as this process started with it (sd_notify(3)); the variable is taken
// out of the environment before any command runs, so that nobody else speaks for the component:
// k8s.io/apiserver's GenericAPIServer sends READY=1 as soon as it listens, before its post-start hooks
// (namespaces, the kubernetes Service) are done and /readyz is ok, and children (the agent's managed
// containerd, `nodekit up`'s components) would announce their own readiness as ours.
var notifySocket = func() string {
	s := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return s
}()

// notifySystemd tells the service manager about component's lifecycle over notifySocket (nothing
// happens when it is unset, i.e. not under a Type=notify unit): READY=1 once ready is closed,
// STOPPING=1 once ctx ends. It returns at once; the messages are sent from its own goroutine.
func notifySystemd(ctx context.Context, component string, ready <-chan struct{}) {
	socket := notifySocket
	if socket == "" {
		return
	}
	send := func(state string) {
		if err := sdNotify(socket, state); err != nil {
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

// sdNotify sends one sd_notify datagram (newline-separated VAR=value assignments) to socket, a path or,
// with a leading '@', a Linux abstract socket name (which Go's net package maps to the leading NUL).
func sdNotify(socket, state string) error {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state + "\n"))
	return err
}
