package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/explain"
)

// explainFlags are `nodekit explain`'s flags.
type explainFlags struct {
	kubeconfig, namespace, output string
}

// The explain subcommand: one timeline of a pod's, node's or Service's path and a verdict (package
// explain), read through the API only.
func init() {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain (pod NAME [-n NS] | node NAME | service NAME [-n NS])",
		Short: "Show a pod's, node's or Service's path through the cluster and where it is stuck",
		Long: `explain reads the object, its events, its node, its EndpointSlices and (for failing containers) their
log tails through the API server, prints them as one timeline and ends with a VERDICT naming the step
where it is stuck and the most likely fix. It works against any conformant control plane.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("explain: name a kind and an object: pod NAME, node NAME or service NAME")
			}
			return fmt.Errorf("explain: unknown kind %q: want pod, node or service", args[0])
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, then <data-dir>/admin.kubeconfig)")
	pf.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of the pod or Service")
	pf.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	for _, kind := range []string{"pod", "node", "service"} {
		cmd.AddCommand(&cobra.Command{
			Use: kind + " NAME", Short: "Explain a " + kind,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) != 1 {
					return fmt.Errorf("explain %s: want one %s name, got %d arguments", kind, kind, len(args))
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error { return f.run(c, kind, args[0]) },
		})
	}
	root.AddCommand(cmd)
}

// run fetches and prints one report.
func (f *explainFlags) run(cmd *cobra.Command, kind, name string) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	e := &explain.Explainer{Client: c}
	var r *explain.Report
	switch kind {
	case "pod":
		r, err = e.Pod(cmd.Context(), f.namespace, name)
	case "node":
		r, err = e.Node(cmd.Context(), name)
	default:
		r, err = e.Service(cmd.Context(), f.namespace, name)
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		return r.WriteJSON(cmd.OutOrStdout())
	}
	out := cmd.OutOrStdout()
	tty := false
	if file, ok := out.(*os.File); ok {
		tty = term.IsTerminal(int(file.Fd()))
	}
	return r.WriteText(out, tty)
}

// client builds an API client on --kubeconfig, else $KUBECONFIG, else the server's admin kubeconfig.
func (f *explainFlags) client() (kubernetes.Interface, error) {
	path := f.kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	return adminClient(path)
}
