package crictl

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// upstreamTable is the list of upstream crictl's commands and flags, generated from its --help by
// hack/crictl-upstream-flags.sh (`make crictl-upstream-flags` rebuilds the binary and the table).
const upstreamTable = "testdata/upstream-flags.txt"

// upstreamItem is one line of upstreamTable: a command (path and aliases) or a flag of a command
// (path "" for the global flags) with its aliases (-x shorthands, --xy long aliases) and environment
// variables.
type upstreamItem struct {
	kind, path, name string
	aliases, env     []string
}

// key names the item as docs/crictl.md and notHere do: "crictl run jsonschema", "crictl pull --username".
func (u upstreamItem) key() string {
	k := strings.TrimSpace("crictl " + u.path)
	if u.kind == "command" {
		return strings.TrimSpace(k + " " + u.name)
	}
	return k + " " + u.name
}

func readUpstreamTable(t *testing.T) []upstreamItem {
	t.Helper()
	f, err := os.Open(upstreamTable)
	if err != nil {
		t.Fatalf("%v (regenerate it with `make crictl-upstream-flags`)", err)
	}
	defer f.Close()
	var items []upstreamItem
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		words := strings.Fields(sc.Text())
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		var it upstreamItem
		switch it.kind = words[0]; it.kind {
		case "command":
			// "command [PARENT] NAME [ALIAS...]": a subcommand's parent is a known command name.
			rest := words[1:]
			if len(rest) > 1 && isCommandName(items, rest[0]) {
				it.path, rest = rest[0], rest[1:]
			}
			it.name, it.aliases = rest[0], rest[1:]
		case "flag":
			// "flag PATH... --NAME [ALIAS...] [$ENV...]", PATH "-" for the global flags.
			i := 1
			var path []string
			for ; i < len(words) && !strings.HasPrefix(words[i], "--"); i++ {
				if words[i] != "-" {
					path = append(path, words[i])
				}
			}
			if i == len(words) {
				t.Fatalf("%s:%d: flag line without --NAME: %q", upstreamTable, line, sc.Text())
			}
			it.path, it.name = strings.Join(path, " "), words[i]
			for _, w := range words[i+1:] {
				if env, ok := strings.CutPrefix(w, "$"); ok {
					it.env = append(it.env, env)
				} else {
					it.aliases = append(it.aliases, w)
				}
			}
		default:
			t.Fatalf("%s:%d: unknown line %q", upstreamTable, line, sc.Text())
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return items
}

func isCommandName(items []upstreamItem, name string) bool {
	for _, it := range items {
		if it.kind == "command" && it.path == "" && it.name == name {
			return true
		}
	}
	return false
}

// findCommand walks path ("run jsonschema") from root by name or alias.
func findCommand(root *cobra.Command, path string) *cobra.Command {
	cmd := root
	for _, name := range strings.Fields(path) {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == name || c.HasAlias(name) {
				next = c
			}
		}
		if next == nil {
			return nil
		}
		cmd = next
	}
	return cmd
}

// TestUpstreamParity checks every command and flag of upstream crictl v1.37 (upstreamTable) against
// nodekit's command tree: it exists with the same aliases, shorthands and environment variables, or it
// is one of notHere and docs/crictl.md says why.
func TestUpstreamParity(t *testing.T) {
	items := readUpstreamTable(t)
	if len(items) < 200 {
		t.Fatalf("%s lists only %d items", upstreamTable, len(items))
	}
	docs, err := os.ReadFile("../docs/crictl.md")
	if err != nil {
		t.Fatal(err)
	}
	root := (&app{}).tree()
	seen := map[string]bool{}
	for _, it := range items {
		key := it.key()
		seen[key] = true
		if reason, ok := notHere[key]; ok {
			if !strings.Contains(string(docs), "`"+key+"`") || !strings.Contains(string(docs), reason) {
				t.Errorf("%s is not here; docs/crictl.md must list `%s` with the reason %q", key, key, reason)
			}
			continue
		}
		if !strings.Contains(string(docs), "`"+key+"`") {
			t.Errorf("docs/crictl.md does not list `%s`", key)
		}
		if it.kind == "command" {
			cmd := findCommand(root, strings.TrimSpace(it.path+" "+it.name))
			if cmd == nil {
				t.Errorf("%s: no such command", key)
				continue
			}
			for _, a := range it.aliases {
				if !cmd.HasAlias(a) {
					t.Errorf("%s: alias %s missing (aliases %v)", key, a, cmd.Aliases)
				}
			}
			continue
		}
		cmd := findCommand(root, it.path)
		if cmd == nil {
			t.Errorf("%s: no command %q", key, it.path)
			continue
		}
		fs := cmd.Flags()
		f := fs.Lookup(strings.TrimPrefix(it.name, "--"))
		if f == nil {
			t.Errorf("%s: no such flag", key)
			continue
		}
		checkFlagAliases(t, key, fs, f, it.aliases)
		for _, env := range it.env {
			if got := f.Annotations[envAnnotation]; len(got) != 1 || got[0] != env {
				t.Errorf("%s: environment variable %s not honoured (annotation %v)", key, env, got)
			}
		}
	}
	for key := range notHere {
		if !seen[key] {
			t.Errorf("notHere lists %s, which upstream does not have", key)
		}
	}
}

func checkFlagAliases(t *testing.T, key string, fs *pflag.FlagSet, f *pflag.Flag, aliases []string) {
	t.Helper()
	for _, a := range aliases {
		if short, ok := strings.CutPrefix(a, "-"); ok && len(short) == 1 {
			if f.Shorthand != short {
				t.Errorf("%s: shorthand -%s missing (have %q)", key, short, f.Shorthand)
			}
			continue
		}
		long := strings.TrimLeft(a, "-")
		if af := fs.Lookup(long); af == nil || af.Value != f.Value {
			t.Errorf("%s: alias --%s missing or not the same flag", key, long)
		}
	}
}
