package iptables

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseSave feeds arbitrary iptables-save output to parseSave, which decides what Cleanup deletes.
// Properties: it never panics; every chain found is a nodekit chain name; a rule of another chain with an
// arbitrary comment is taken as a jump to nodekit exactly when its -j target is a nodekit chain (a comment
// mentioning "-j NODEKIT-" must not get another owner's rule deleted); and saveTokens reads back the
// arguments restoreArgs writes.
func FuzzParseSave(f *testing.F) {
	f.Add("*nat\n:PREROUTING ACCEPT [0:0]\n:NODEKIT-SERVICES - [0:0]\n-A PREROUTING -m comment --comment \"nodekit service portals\" -j NODEKIT-SERVICES\n-A NODEKIT-SERVICES -j RETURN\nCOMMIT\n",
		"kube: \"x\" -j NODEKIT-SERVICES", "ACCEPT")
	f.Add(":NODEKIT-\n:NODEKIT-A\t-\n-A \n-A X -g NODEKIT-Y\n-A X \"-j NODEKIT-Z\n", "\\", "NODEKIT-SEP-1")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, save, comment, target string) {
		chains, foreign := parseSave(strings.Split(save, "\n"))
		for _, c := range chains {
			if !strings.HasPrefix(c, ChainPrefix) || strings.ContainsFunc(c, unicode.IsSpace) {
				t.Fatalf("chain %q is not a nodekit chain name", c)
			}
		}
		for _, r := range foreign {
			if strings.HasPrefix(r, ChainPrefix) || !jumpsToNodekit(r) {
				t.Fatalf("rule %q taken as a foreign jump to nodekit", r)
			}
		}
		if target == "" || strings.ContainsFunc(target, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '\\' }) {
			return
		}
		rule := "-A INPUT -m comment --comment " + restoreArgs([]string{comment}) + " -j " + target
		_, foreign = parseSave([]string{rule})
		if want := strings.HasPrefix(target, ChainPrefix); (len(foreign) == 1) != want {
			t.Fatalf("rule %q: foreign jump %v, want %v", rule, foreign, want)
		}
		if comment == "" || strings.ContainsAny(comment, "\n") {
			return
		}
		args := []string{"-m", "comment", "--comment", comment, "-j", target}
		if got := saveTokens(restoreArgs(args)); !slices.Equal(got, args) {
			t.Fatalf("saveTokens(restoreArgs(%q)) = %q", args, got)
		}
	})
}
