// Command standalone links only nodekit's crictl package into a binary, so bench/crictl can separate
// the cost of crictl's own code from the start-up cost (package initialisation, binary size) of the
// full nodekit binary, which also links the kubelet, control plane, proxy and CNI.
package main

import (
	"fmt"
	"os"

	"github.com/nodekit/nodekit/crictl"
)

func main() {
	cmd := crictl.NewCommand()
	cmd.SetArgs(os.Args[1:])
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "crictl:", err)
		os.Exit(1)
	}
}
