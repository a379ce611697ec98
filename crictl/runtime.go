package crictl

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/cri"
)

// statusFlags are the flags of the inspect-style commands (info, inspect, inspectp, inspecti,
// imagefsinfo): -o json|yaml|go-template|table, -q (no verbose info), --template.
type statusFlags struct {
	output, template string
	quiet            bool
}

func (f *statusFlags) add(cmd *cobra.Command, def string, formats string) {
	cmd.Flags().StringVarP(&f.output, "output", "o", def, "output format, one of: "+formats)
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "do not show verbose information")
	cmd.Flags().StringVar(&f.template, "template", "", "Go template used with -o go-template")
}

// versionCommand prints the runtime's CRI Version answer (RuntimeService.Version).
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Display runtime version information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := a.rt()
			if err != nil {
				return err
			}
			r, err := rt.Version(ctx(cmd), &runtimeapi.VersionRequest{Version: cri.APIVersion})
			if err != nil {
				return fmt.Errorf("getting the runtime version: %w", err)
			}
			fmt.Fprintln(a.out, "Version: ", r.GetVersion())
			fmt.Fprintln(a.out, "RuntimeName: ", r.GetRuntimeName())
			fmt.Fprintln(a.out, "RuntimeVersion: ", r.GetRuntimeVersion())
			fmt.Fprintln(a.out, "RuntimeApiVersion: ", r.GetRuntimeApiVersion())
			return nil
		},
	}
}

// infoCommand prints the runtime's Status (conditions, runtime handlers, features and, unless -q, the
// runtime's verbose info such as its config).
func (a *app) infoCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Display information of the container runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(f.output, formatJSON, formatYAML, formatGoTemplate); err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			r, err := rt.Status(ctx(cmd), &runtimeapi.StatusRequest{Verbose: !f.quiet})
			if err != nil {
				return fmt.Errorf("getting status of runtime: %w", err)
			}
			extra := map[string]any{}
			for k, v := range map[string]any{"runtimeHandlers": r.GetRuntimeHandlers(), "features": r.GetFeatures()} {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				var g any
				if err := json.Unmarshal(b, &g); err != nil {
					return err
				}
				if g != nil {
					extra[k] = g
				}
			}
			return printStatus(a.out, []statusDoc{{status: r.GetStatus(), extra: extra, info: r.GetInfo()}}, f.output, f.template)
		},
	}
	f.add(cmd, formatJSON, "json|yaml|go-template")
	return cmd
}
