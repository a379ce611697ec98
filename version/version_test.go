package version

import (
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// The default version is what tests and plain builds report: it must parse as Kubernetes parses a
// server's gitVersion and compare equal to the release it follows (build metadata does not count).
func TestVersionParsesAsTheKubernetesRelease(t *testing.T) {
	v, err := utilversion.ParseSemantic(Version)
	if err != nil {
		t.Fatalf("Version %q does not parse: %v", Version, err)
	}
	k := utilversion.MustParseSemantic(KubernetesVersion)
	if c, err := v.Compare(KubernetesVersion); err != nil || c != 0 || v.PreRelease() != "" || v.Major() != k.Major() || v.Minor() != k.Minor() {
		t.Fatalf("Version %q is not release %s", Version, KubernetesVersion)
	}
	info := Info()
	if info.Major != "1" || info.Minor != "37" || info.GitVersion != Version || info.GoVersion == "" {
		t.Fatalf("Info() = %+v", info)
	}
}
