// Command pause is nodekit's pod sandbox process: PID 1 of every pod's shared namespaces. It holds the
// namespaces open, reaps the zombies of processes re-parented to it (containers sharing the pod's PID
// namespace), and exits 0 on SIGTERM or SIGINT — the contract of Kubernetes' pause container
// (build/pause in kubernetes/kubernetes).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause", version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
