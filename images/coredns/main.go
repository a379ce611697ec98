// Command coredns is the cluster DNS server of nodekit's bundled image nodekit.local/coredns: upstream
// CoreDNS (github.com/coredns/coredns, built from its Go module) with only the plugins the cluster's
// Corefile uses (controlplane/addons): kubernetes (the Kubernetes DNS specification: A/AAAA for Services
// and headless Services, SRV for named ports, pod records, PTR), forward, cache, errors, health, ready,
// loop, reload, loadbalance and log. The plugins register themselves with CoreDNS's server in their
// init functions; coremain.Run parses -conf and serves.
//
// It is its own Go module (images/coredns/go.mod) so that CoreDNS's dependency versions stay out of
// nodekit's go.mod and nodekit's `go vet ./...` and `go test ./...` do not compile it; images/build
// compiles it into the image like the other bundled images.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
