package crictl

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// listFlags are the filters shared by pods, ps, inspect and inspectp, with upstream's names.
type listFlags struct {
	id, name, namespace, state string
	labels                     []string
	latest                     bool
	last                       int
}

func (f *listFlags) add(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "filter by "+what+" name regular expression pattern")
	fl.StringVar(&f.namespace, "namespace", "", "filter by pod namespace regular expression pattern")
	fl.StringVarP(&f.state, "state", "s", "", "filter by "+what+" state")
	fl.StringArrayVar(&f.labels, "label", nil, "filter by key=value label (repeatable)")
	fl.BoolVarP(&f.latest, "latest", "l", false, "show the most recently created "+what)
	fl.IntVarP(&f.last, "last", "n", 0, "show the last n recently created "+what+"s; 0 for unlimited")
}

// labelSelector parses repeated key=value flags into a CRI label selector (nil when empty).
func (f *listFlags) labelSelector() (map[string]string, error) {
	if len(f.labels) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(f.labels))
	for _, l := range f.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.Contains(v, "=") {
			return nil, fmt.Errorf("--label %q: want key=value", l)
		}
		m[k] = v
	}
	return m, nil
}

// matchers compiles the --name and --namespace regular expressions (nil matches everything).
// It also refuses a negative --last, the one numeric filter.
func (f *listFlags) matchers() (name, namespace *regexp.Regexp, err error) {
	if f.last < 0 {
		return nil, nil, fmt.Errorf("--last %d: must be 0 (unlimited) or more", f.last)
	}
	compile := func(flag, p string) (*regexp.Regexp, error) {
		if p == "" {
			return nil, nil
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("--%s: invalid regular expression %q: %w", flag, p, err)
		}
		return re, nil
	}
	if name, err = compile("name", f.name); err != nil {
		return nil, nil, err
	}
	namespace, err = compile("namespace", f.namespace)
	return name, namespace, err
}

// limit returns how many of total (newest first) items --latest/--last keep.
func (f *listFlags) limit(total int) int {
	n := total
	if f.latest {
		n = 1
	}
	if f.last > 0 {
		n = f.last
	}
	return min(n, total)
}

func matches(re *regexp.Regexp, s string) bool { return re == nil || re.MatchString(s) }
