package cluster

import "testing"

// TestCLIWithDataDir: the printed hints repeat --data-dir only when it is not the command's default, and
// keep the CLI as the user ran it (bin/nodekit under make is not on PATH).
func TestCLIWithDataDir(t *testing.T) {
	for _, c := range []struct{ cli, dataDir, def, want string }{
		{"bin/nodekit", DefaultDataDir, DefaultDataDir, "bin/nodekit"},
		{"nodekit", "/srv/nk", DefaultDataDir, "nodekit --data-dir /srv/nk"},
		{"/usr/local/bin/nodekit", DefaultLabDataDir, DefaultLabDataDir, "/usr/local/bin/nodekit"},
		{"bin/nodekit", DefaultDataDir, DefaultLabDataDir, "bin/nodekit --data-dir /var/lib/nodekit"},
	} {
		if got := cliWithDataDir(c.cli, c.dataDir, c.def); got != c.want {
			t.Errorf("cliWithDataDir(%q, %q, %q) = %q, want %q", c.cli, c.dataDir, c.def, got, c.want)
		}
	}
}

// TestConfigCLIDefault: a Config without CLI prints hints with plain "nodekit".
func TestConfigCLIDefault(t *testing.T) {
	c := Config{DataDir: t.TempDir(), NodeName: "n1", Executable: "/bin/true"}
	if err := c.complete(); err != nil {
		t.Fatal(err)
	}
	if c.CLI != "nodekit" {
		t.Errorf("CLI = %q, want nodekit", c.CLI)
	}
}
