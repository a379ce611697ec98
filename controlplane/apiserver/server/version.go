package server

import (
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/nodekit/nodekit/version"
)

// reportedVersion is the API server's effective version (binary, emulation and minimum compatibility
// version: the Kubernetes release nodekit follows) whose /version document carries nodekit's build
// (version.Info: gitVersion v1.37.2+nodekit…, commit, build date) in place of k8s.io/component-base's
// link-time defaults, which a build without upstream's ldflags leaves unparseable
// ("v0.0.0-master+$Format:%H$").
type reportedVersion struct {
	basecompatibility.EffectiveVersion
}

// effectiveVersion returns the API server's version for genericapiserver.Config.EffectiveVersion.
func effectiveVersion() basecompatibility.EffectiveVersion {
	return reportedVersion{basecompatibility.NewEffectiveVersionFromString(strings.TrimPrefix(version.KubernetesVersion, "v"), "", "")}
}

// Info is the /version document: nodekit's build information, with the emulation and minimum
// compatibility versions of the embedded effective version.
func (v reportedVersion) Info() *apimachineryversion.Info {
	base := v.EffectiveVersion.Info()
	if base == nil {
		return nil
	}
	info := version.Info()
	info.EmulationMajor, info.EmulationMinor = base.EmulationMajor, base.EmulationMinor
	info.MinCompatibilityMajor, info.MinCompatibilityMinor = base.MinCompatibilityMajor, base.MinCompatibilityMinor
	return &info
}
