// Package version holds nodekit's version string, set at link time with
// -ldflags "-X github.com/nodekit/nodekit/version.Version=...". It is what the kubelet reports as
// nodeInfo.kubeletVersion and what `nodekit version` prints.
package version

// Version is nodekit's version. The Kubernetes minor it follows is in KubernetesVersion.
var Version = "v0.1.0-dev"

// KubernetesVersion is the Kubernetes API version nodekit speaks (the k8s.io/api module it is built on);
// the kubelet reports it as kubeletVersion and the apiserver serves it from /version.
const KubernetesVersion = "v1.37.2"
