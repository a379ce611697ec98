// Package version holds the version every nodekit component reports: `nodekit version`, the API
// server's /version, the kubelet's nodeInfo.kubeletVersion and the User-Agent of nodekit's clients.
// It is the Kubernetes release nodekit follows with "+nodekit" build metadata, as k3s reports
// v1.xx.y+k3s1: a valid semantic version that Kubernetes' own parsers (kubectl version, the e2e
// framework's server-version checks) accept and that compares equal to the upstream release. The
// Makefile stamps the commit at link time:
//
//	-ldflags "-X github.com/nodekit/nodekit/version.Version=v1.37.2+nodekit.<commit>
//	          -X github.com/nodekit/nodekit/version.GitCommit=<sha> -X ....GitTreeState=clean|dirty
//	          -X ....BuildDate=<RFC 3339>"
//
// (plus the same values into k8s.io/component-base/version, which client-go's User-Agent reads). A
// plain `go build` or `go test` keeps the defaults below.
package version

import (
	"fmt"
	"runtime"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// KubernetesVersion is the Kubernetes release nodekit follows (the k8s.io/api module it is built on).
const KubernetesVersion = "v1.37.2"

// Link-time variables (see the package doc). Defaults are a plain build's.
var (
	// Version is nodekit's version: KubernetesVersion plus "+nodekit" build metadata.
	Version = KubernetesVersion + "+nodekit"
	// GitCommit is the commit built ("" when unknown).
	GitCommit = ""
	// GitTreeState is "clean" or "dirty" ("" when unknown).
	GitTreeState = ""
	// BuildDate is the build time in RFC 3339 (the Unix epoch when unknown, as upstream's default).
	BuildDate = "1970-01-01T00:00:00Z"
)

// Info returns the /version document of this build: major and minor of KubernetesVersion, gitVersion
// Version, the commit, tree state and build date, and the Go toolchain and platform.
func Info() apimachineryversion.Info {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(KubernetesVersion, "v"), ".", 3); len(parts) == 3 {
		major, minor = parts[0], parts[1]
	}
	return apimachineryversion.Info{
		Major:        major,
		Minor:        minor,
		GitVersion:   Version,
		GitCommit:    GitCommit,
		GitTreeState: GitTreeState,
		BuildDate:    BuildDate,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
}
