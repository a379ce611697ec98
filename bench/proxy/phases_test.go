package main

import (
	"testing"

	"github.com/nodekit/nodekit/proxy/iptables"
	"github.com/nodekit/nodekit/proxy/state"
)

// BenchmarkCompute10k measures the desired-state computation for 10k Services × 3 endpoints.
func BenchmarkCompute10k(b *testing.B) {
	svcs, slices := objects(10000)
	for b.Loop() {
		state.Compute(svcs, slices, state.Options{NodeName: "bench-node"})
	}
}

// BenchmarkBuild10k measures building the iptables rules from that state.
func BenchmarkBuild10k(b *testing.B) {
	svcs, slices := objects(10000)
	snap := state.Compute(svcs, slices, state.Options{NodeName: "bench-node"})
	for b.Loop() {
		iptables.Build(snap, iptables.Config{})
	}
}
