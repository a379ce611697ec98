// Package cli names the flags every nodekit command shares (bound once, on the root command, in
// cmd/nodekit), so that the packages that build nodekit command lines — the agent's and the server's
// Args, cluster's supervisor — spell them from one place.
package cli

const (
	// FlagDataDir is the directory of a command's persistent state (default /var/lib/nodekit).
	FlagDataDir = "data-dir"
	// FlagLogLevel is the least level logged: debug, info, warn or error.
	FlagLogLevel = "log-level"
	// FlagLogJSON makes a command log JSON lines instead of key=value text (cluster's children always do,
	// for the log relay).
	FlagLogJSON = "log-json"
)

// Flag returns the command-line spelling of a flag name: "--" + name.
func Flag(name string) string { return "--" + name }
