// Package node_test holds the end-to-end tests of nodekit's node half: the kubelet server over a real
// containerd, and node registration, heartbeats and readiness against a real API server.
package node_test

import (
	"net/url"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
