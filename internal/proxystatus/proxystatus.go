// Package proxystatus is the document a node's service proxy publishes about what it has programmed:
// for every Service of its last successful sync, the Service's and its EndpointSlices' resourceVersions,
// and when that sync finished. The agent serves it on the kubelet API at Path (so the API server proxies
// it as /api/v1/nodes/NAME/proxy/serviceproxy), and `nodekit explain service` compares it with the
// objects in the API to tell whether each node's proxy has caught up. It does not depend on any metric
// name; it is nodekit's own, and a node without it (an upstream kubelet) answers 404.
package proxystatus

import "time"

// Path is the kubelet API path of the document (GET, authorized as nodes/proxy).
const Path = "/serviceproxy"

// Status is one node's proxy state.
type Status struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Disabled is true when the node runs no nodekit proxy (agent --disable-proxy: another proxy, if
	// any, programs the node, and nothing here says what it did); the other fields are then empty.
	Disabled bool `json:"disabled,omitempty"`
	// Mode is the proxy's backend: iptables, ipvs or nftables.
	Mode string `json:"mode,omitempty"`
	// LastSync is when the last successful sync finished writing the kernel's rules; zero before the first.
	LastSync time.Time `json:"lastSync"`
	// LastError is the error of the last sync when it failed (the rules are then those of LastSync);
	// LastErrorTime is when it failed. Both are empty after a successful sync.
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitempty"`
	// Services are the Services the last successful sync programmed, sorted by namespace and name.
	Services []Service `json:"services"`
}

// Service is one Service as the proxy programmed it.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ResourceVersion is the Service object's metadata.resourceVersion the sync used.
	ResourceVersion string `json:"resourceVersion"`
	// EndpointSlices maps each EndpointSlice (label kubernetes.io/service-name) the sync used to its
	// resourceVersion.
	EndpointSlices map[string]string `json:"endpointSlices,omitempty"`
	// Problems are the reasons ports of the Service were skipped (invalid), "PORT: reason".
	Problems []string `json:"problems,omitempty"`
}

// Find returns the Service namespace/name of s, or nil when the last sync did not program it.
func (s *Status) Find(namespace, name string) *Service {
	for i := range s.Services {
		if s.Services[i].Namespace == namespace && s.Services[i].Name == name {
			return &s.Services[i]
		}
	}
	return nil
}
