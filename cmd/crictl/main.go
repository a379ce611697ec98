// Command crictl is nodekit's crictl on its own: the same commands as `nodekit crictl`, in a binary that
// links only the crictl package. A debugging CLI is started once per command, so its start-up is most of
// its cost: the multi-call nodekit binary spends ≈20 ms in package initialisation of the kubelet, the
// control plane and the proxy before crictl runs (bench/crictl measures both against upstream crictl).
package main

import (
	"os"

	"github.com/nodekit/nodekit/crictl"
)

func main() {
	cmd := crictl.NewCommand()
	cmd.SetArgs(os.Args[1:])
	os.Exit(crictl.Exit(os.Stderr, "crictl", cmd.Execute()))
}
