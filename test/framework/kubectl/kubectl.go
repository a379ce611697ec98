// Package kubectl finds the kubectl the end-to-end tests run.
package kubectl

import "os/exec"

// Cached is where the conformance run (hack/conformance) builds kubectl 1.37.
const Cached = "/var/cache/nodekit/conformance/v1.37.2/bin/kubectl"

// Path is kubectl 1.37 when the conformance cache has built it, else the kubectl on PATH ("" when there
// is none).
func Path() string {
	if _, err := exec.LookPath(Cached); err == nil {
		return Cached
	}
	p, _ := exec.LookPath("kubectl")
	return p
}
