package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodekit/nodekit/agent"
)

// TestAgentArgsRoundTrip: the argv agent.Config.Args builds (what `nodekit up` runs) parses through
// `nodekit agent`'s real command line to the same Config, and --data-dir reaches the agent's Config
// when written before the subcommand too, as the global flag.
func TestAgentArgsRoundTrip(t *testing.T) {
	want := agent.Default()
	want.DataDir, want.Kubeconfig, want.NodeName, want.NodeIP = "/srv/nk", "/srv/nk/agent/kubelet.kubeconfig", "n1", "10.0.0.11"
	want.NodeLabels = map[string]string{"zone": "a"}
	want.DisableProxy, want.Kubelet.Port, want.Kubelet.ClusterDNS = true, 11250, []string{"10.96.0.10"}
	cmd, rest, err := root.Find(want.Args())
	if err != nil || cmd.Name() != agent.Command {
		t.Fatalf("Find(%q) = %v, %v", want.Args(), cmd.Name(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	got, err := agentFlags.Config()
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%q parse to\n%+v\nwant\n%+v", want.Args(), got, want)
	}

	cmd, rest, err = root.Find([]string{"--data-dir", "/other", agent.Command})
	if err != nil || cmd.Name() != agent.Command {
		t.Fatalf("Find: %v, %v", cmd.Name(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if got, _ := agentFlags.Config(); got.DataDir != "/other" {
		t.Errorf("nodekit --data-dir /other agent: DataDir = %q", got.DataDir)
	}
}
