// Package deps pins the libraries nodekit's packages are being built on while they land in parallel;
// it is removed once every import below is used by a real package.
package deps

import (
	_ "github.com/containerd/containerd/v2/client"
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/containernetworking/plugins/pkg/ns"
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/layout"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "sigs.k8s.io/yaml"
)
