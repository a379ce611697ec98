// Package bundled names the OCI images nodekit ships for offline nodes: the pod sandbox (pause) image,
// the demo server used by examples and end-to-end tests, and CoreDNS, the cluster DNS add-on. Their
// sources live in images/pause, images/demo-server and images/coredns (a module of its own); images/build turns them into OCI image archives, which the runtime imports into
// containerd's k8s.io namespace at agent start (the k3s airgap convention) and `nodekit registry` serves.
//
// This package only holds names so that low floors (runtime/) can refer to the images without
// depending on the builder.
package bundled

const (
	// Registry is the registry host of every bundled image. It resolves nowhere: the images reach
	// containerd by import, or through `nodekit registry` under its loopback address.
	Registry = "nodekit.local"
	// Pause is the pod sandbox image (containerd's sandbox_image / pinned_images.sandbox).
	Pause = Registry + "/pause:3.10"
	// DemoServerV1 is the demo HTTP server, version label "v1".
	DemoServerV1 = Registry + "/demo-server:v1"
	// DemoServerV2 is the same server built with version label "v2", so a rolling update is visible
	// in what `/` reports.
	DemoServerV2 = Registry + "/demo-server:v2"
	// CoreDNS is the cluster DNS server (the coredns add-on), tagged with the CoreDNS release that
	// images/coredns/go.mod requires.
	CoreDNS = Registry + "/coredns:" + CoreDNSVersion
	// CoreDNSVersion is the github.com/coredns/coredns module version images/coredns builds.
	CoreDNSVersion = "v1.15.0"
)

// All lists every bundled image reference, in build order.
var All = []string{Pause, DemoServerV1, DemoServerV2, CoreDNS}

// Toolbox lists the commands the demo-server binary also implements, dispatched by argv[0]; its image
// links /bin/<name> to the binary for each, so exec and exec probes work without a shell or coreutils.
var Toolbox = []string{"cat", "echo", "env", "false", "getent", "hostname", "ln", "ls", "nslookup", "rm", "sh", "sleep", "touch", "true"}
