package crictl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

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
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return runtimeVersion(c, cl, a.out)
		}),
	}
}

// runtimeVersion prints the Version answer: Version, RuntimeName, RuntimeVersion, RuntimeApiVersion.
func runtimeVersion(c context.Context, cl criClient, out io.Writer) error {
	r, err := cl.rt.Version(c, &runtimeapi.VersionRequest{Version: cri.APIVersion})
	if err != nil {
		return fmt.Errorf("getting the runtime version: %w", err)
	}
	fmt.Fprintln(out, "Version: ", r.GetVersion())
	fmt.Fprintln(out, "RuntimeName: ", r.GetRuntimeName())
	fmt.Fprintln(out, "RuntimeVersion: ", r.GetRuntimeVersion())
	fmt.Fprintln(out, "RuntimeApiVersion: ", r.GetRuntimeApiVersion())
	return nil
}

// infoCommand prints the runtime's Status (conditions, runtime handlers, features and, unless -q, the
// runtime's verbose info such as its config).
func (a *app) infoCommand() *cobra.Command {
	var o statusFlags
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Display information of the container runtime",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return runtimeInfo(c, cl, &o, a.out)
		}),
	}
	o.add(cmd, formatJSON, "json|yaml|go-template")
	return cmd
}

// runtimeInfo prints the Status answer as an inspect-style document (json, yaml or go-template).
func runtimeInfo(c context.Context, cl criClient, o *statusFlags, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML, formatGoTemplate); err != nil {
		return err
	}
	r, err := cl.rt.Status(c, &runtimeapi.StatusRequest{Verbose: !o.quiet})
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
	return printStatus(out, []statusDoc{{status: r.GetStatus(), extra: extra, info: r.GetInfo()}}, o.output, o.template)
}
