package crictl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// unsupported turns a runtime's Unimplemented answer to call into an error saying that the runtime
// does not support what (e.g. "checkpointing containers"); other errors are wrapped as "call: err".
func unsupported(call, what string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("the runtime does not support %s (it answers CRI %s with Unimplemented: %s)", what, call, status.Convert(err).Message())
	}
	return fmt.Errorf("%s: %w", call, err)
}

// runtimeConfigCommand prints the runtime's configuration as the CRI RuntimeConfig call reports it
// (the cgroup driver).
func (a *app) runtimeConfigCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "runtime-config",
		Short: "Retrieve the container runtime configuration",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return runtimeConfig(c, cl, a.out)
		}),
	}
}

// runtimeConfig prints "cgroup driver:" and the driver's enum name (SYSTEMD or CGROUPFS), aligned as
// upstream aligns it; nothing when the runtime reports no Linux configuration.
func runtimeConfig(c context.Context, cl criClient, out io.Writer) error {
	r, err := cl.rt.RuntimeConfig(c, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		return unsupported("RuntimeConfig", "reporting its configuration", err)
	}
	t := tabwriter.NewWriter(out, 10, 1, 3, ' ', 0)
	if l := r.GetLinux(); l != nil {
		fmt.Fprintf(t, "cgroup driver:\t%s\n", l.GetCgroupDriver())
	}
	return t.Flush()
}

// updateRuntimeConfigOptions are the options of update-runtime-config.
type updateRuntimeConfigOptions struct {
	podCIDR    string
	podCIDRSet bool
}

// updateRuntimeConfigCommand sends the runtime a new configuration (CRI UpdateRuntimeConfig): the pod
// CIDR, as the kubelet does when the node's spec.podCIDR is set.
func (a *app) updateRuntimeConfigCommand() *cobra.Command {
	var o updateRuntimeConfigOptions
	cmd := &cobra.Command{
		Use:   "update-runtime-config --pod-cidr CIDR",
		Short: "Update the runtime configuration",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return o.run(c, cl, a.errOut)
		}),
	}
	cmd.Flags().StringVarP(&o.podCIDR, "pod-cidr", "p", "", "the CIDR (or comma-separated CIDRs) for pod IP addresses; empty asks the runtime to omit it")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { o.podCIDRSet = cmd.Flags().Changed("pod-cidr") }
	return cmd
}

// run validates the CIDRs and calls UpdateRuntimeConfig; "Runtime config successfully updated" goes to
// errOut, as upstream logs it.
func (o *updateRuntimeConfigOptions) run(c context.Context, cl criClient, errOut io.Writer) error {
	if !o.podCIDRSet {
		return errors.New("update-runtime-config: nothing to update, give --pod-cidr")
	}
	if o.podCIDR != "" {
		for _, cidr := range strings.Split(o.podCIDR, ",") {
			if _, err := netip.ParsePrefix(strings.TrimSpace(cidr)); err != nil {
				return fmt.Errorf("--pod-cidr %q: %q is not a CIDR (want e.g. 10.244.0.0/24): %v", o.podCIDR, cidr, err)
			}
		}
	}
	_, err := cl.rt.UpdateRuntimeConfig(c, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: o.podCIDR}},
	})
	if err != nil {
		return unsupported("UpdateRuntimeConfig", "updating its configuration", err)
	}
	fmt.Fprintln(errOut, "Runtime config successfully updated")
	return nil
}

// metricsOptions are the options of metricsp and metricdescs: -o json|yaml and, for metricsp, --watch.
type metricsOptions struct {
	output string
	watch  bool
}

func (o *metricsOptions) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", formatJSON, "output format, one of: json|yaml")
}

// metricspCommand prints the runtime's pod metrics (CRI ListPodSandboxMetrics), the unstructured
// successor of cAdvisor's /metrics/cadvisor.
func (a *app) metricspCommand() *cobra.Command {
	var o metricsOptions
	cmd := &cobra.Command{
		Use:   "metricsp",
		Short: "List pod metrics (CRI ListPodSandboxMetrics)",
		Args:  cobra.NoArgs,
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, _ []string) error {
			return o.podMetrics(c, cl, a.out)
		})),
	}
	o.add(cmd)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "print the metrics every 500 ms until interrupted")
	return cmd
}

// podMetrics prints a ListPodSandboxMetricsResponse once, or every 500 ms with --watch until c ends.
func (o *metricsOptions) podMetrics(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML); err != nil {
		return err
	}
	return watchLoop(c, o.watch, func() error {
		r, err := cl.rt.ListPodSandboxMetrics(c, &runtimeapi.ListPodSandboxMetricsRequest{})
		if err != nil {
			if c.Err() != nil && o.watch {
				return nil
			}
			return unsupported("ListPodSandboxMetrics", "pod metrics", err)
		}
		return printProto(out, r, o.output)
	})
}

// metricdescsCommand prints the descriptors of the metrics metricsp reports (CRI
// ListMetricDescriptors).
func (a *app) metricdescsCommand() *cobra.Command {
	var o metricsOptions
	cmd := &cobra.Command{
		Use:   "metricdescs",
		Short: "List metric descriptors (CRI ListMetricDescriptors)",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return o.descriptors(c, cl, a.out)
		}),
	}
	o.add(cmd)
	return cmd
}

// descriptors prints a ListMetricDescriptorsResponse.
func (o *metricsOptions) descriptors(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML); err != nil {
		return err
	}
	r, err := cl.rt.ListMetricDescriptors(c, &runtimeapi.ListMetricDescriptorsRequest{})
	if err != nil {
		return unsupported("ListMetricDescriptors", "metric descriptors", err)
	}
	return printProto(out, r, o.output)
}
