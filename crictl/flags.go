package crictl

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// envAnnotation is the pflag annotation naming the environment variable a flag falls back to, as
// upstream's flags do (CRICTL_CREDS, CRICTL_AUTH, CRICTL_PULL_TIMEOUT, CRI_CONFIG_FILE, ...).
const envAnnotation = "crictl_env"

// withEnv makes flag name of fs fall back to the environment variable env when it is not given on the
// command line (applyEnv does it), and says so in its usage.
func withEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	f.Usage += " (env " + env + ")"
	if err := fs.SetAnnotation(name, envAnnotation, []string{env}); err != nil {
		panic(err) // only for a flag name that is not defined: a programming error
	}
}

// applyEnv sets every flag of fs that has an environment variable (withEnv), is not given on the
// command line and whose variable is set and not empty, from that variable. A value the flag refuses
// is an error naming the variable and the flag.
func applyEnv(fs *pflag.FlagSet) error {
	// A flag given under an alias (longAlias: --pt for --pull-timeout) is given too.
	given := map[pflag.Value]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Value] = true })
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		envs := f.Annotations[envAnnotation]
		if err != nil || given[f.Value] || len(envs) == 0 {
			return
		}
		v, ok := os.LookupEnv(envs[0])
		if !ok || v == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("environment variable %s=%q (for --%s): %v", envs[0], v, f.Name, serr)
		}
	})
	return err
}

// longAlias adds alias as a second long name of flag name (upstream's --pt for --pull-timeout,
// --tls-server-name for --tls-sni): a hidden flag sharing the same value.
func longAlias(fs *pflag.FlagSet, name, alias string) {
	f := fs.Lookup(name)
	f.Usage += " (alias --" + alias + ")"
	fs.AddFlag(&pflag.Flag{Name: alias, Usage: "alias of --" + name, Value: f.Value, DefValue: f.DefValue,
		NoOptDefVal: f.NoOptDefVal, Hidden: true})
}

// singleDashLong rewrites "-name" and "-name=value" to "--name…" when name (two characters or more) is
// a long flag of fs: upstream crictl parses flags with Go's flag package, which takes long flags with
// one dash too, so `crictl pull -pt 30s` and `crictl -max-retries 0 ps` work there. Other words are
// kept, shorthand groups such as "-it" included; it stops at "--".
func singleDashLong(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if name, ok := strings.CutPrefix(a, "-"); ok && !strings.HasPrefix(name, "-") {
			n, _, _ := strings.Cut(name, "=")
			if len(n) > 1 && fs.Lookup(n) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// notHere lists what upstream crictl v1.37 has and nodekit's crictl does not, with the reason; the
// parity test (parity_test.go) checks that docs/crictl.md gives the same reasons, and an unknown-flag
// error names the reason.
var notHere = map[string]string{
	"crictl --enable-tracing":                    tracingReason,
	"crictl --tracing-endpoint":                  tracingReason,
	"crictl --tracing-sampling-rate-per-million": tracingReason,
	"crictl update --cpu-count":                  windowsReason,
	"crictl update --cpu-maximum":                windowsReason,
}

const windowsReason = "Windows-only container resources (CRI WindowsContainerResources); nodekit runs Linux nodes only"

const tracingReason = "no OpenTelemetry tracing: the CRI client (runtime/cri) is shared with the kubelet and has no tracing hook, and the crictl binary links no OpenTelemetry SDK"

// notHereHint returns the reason a flag named in a parse error is missing here ("" when it is not one
// of notHere).
func notHereHint(cmdPath string, err error) string {
	msg := err.Error()
	i := strings.Index(msg, "--")
	if !strings.HasPrefix(msg, "unknown flag") || i < 0 {
		return ""
	}
	flag, _, _ := strings.Cut(msg[i:], "=")
	return notHere[cmdPath+" "+flag]
}
