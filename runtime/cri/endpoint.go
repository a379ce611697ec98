package cri

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ParseEndpoint turns a CRI endpoint as kubelet and crictl accept it on Linux into the absolute path of
// its unix socket. Accepted forms: "unix:///run/containerd/containerd.sock", "unix:/run/x.sock" and a
// plain path "/run/x.sock" (relative paths are made absolute against the working directory).
//
// Errors name the endpoint and the reason: an empty endpoint, a scheme other than unix (CRI runtimes on
// Linux listen on unix sockets only; tcp and npipe are not supported here), or a unix URL with a host
// part ("unix://run/x.sock", a common typo for "unix:///run/x.sock").
func ParseEndpoint(endpoint string) (string, error) {
	ep := strings.TrimSpace(endpoint)
	if ep == "" {
		return "", fmt.Errorf("CRI endpoint is empty: want unix:///path/to/runtime.sock or a socket path")
	}
	path := ep
	if scheme, rest, ok := strings.Cut(ep, "://"); ok {
		if scheme != "unix" {
			return "", fmt.Errorf("CRI endpoint %q: scheme %q is not supported, only unix:// sockets", endpoint, scheme)
		}
		if !strings.HasPrefix(rest, "/") {
			return "", fmt.Errorf("CRI endpoint %q: unix endpoints need an absolute path after unix:// (did you mean unix:///%s?)", endpoint, rest)
		}
		path = rest
	} else if rest, ok := strings.CutPrefix(ep, "unix:"); ok {
		path = rest
	} else if i := strings.Index(ep, ":"); i > 0 && !strings.ContainsAny(ep[:i], "/.") {
		return "", fmt.Errorf("CRI endpoint %q: scheme %q is not supported, only unix:// sockets", endpoint, ep[:i])
	}
	if path == "" {
		return "", fmt.Errorf("CRI endpoint %q: socket path is empty", endpoint)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("CRI endpoint %q: %w", endpoint, err)
	}
	return abs, nil
}

// EndpointURL returns the canonical "unix:///abs/path" form of a socket path or endpoint; it is the form
// nodekit prints and passes to other tools. Invalid endpoints yield the ParseEndpoint error.
func EndpointURL(endpoint string) (string, error) {
	p, err := ParseEndpoint(endpoint)
	if err != nil {
		return "", err
	}
	return "unix://" + p, nil
}
