package crictl

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventsCommand streams container events (RuntimeService.GetContainerEvents, the evented-PLEG stream)
// until interrupted, one document per event. Runtimes without the RPC (containerd 1.6) get a clear
// message instead.
func (a *app) eventsCommand() *cobra.Command {
	var o statusFlags
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "Stream the events of containers",
		Args:    cobra.NoArgs,
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, _ []string) error {
			return containerEvents(c, cl, &o, a.streams)
		})),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", formatJSON, "output format, one of: json|yaml|go-template")
	cmd.Flags().StringVar(&o.template, "template", "", "Go template used with -o go-template")
	return cmd
}

// containerEvents prints each event as a json or yaml document, or through the go-template, until the
// stream or c ends; an event that cannot be formatted is reported on s.errOut and skipped.
func containerEvents(c context.Context, cl criClient, o *statusFlags, s streams) error {
	switch o.output {
	case formatJSON, formatYAML:
		if o.template != "" {
			return fmt.Errorf("--template can't be used with %q format", o.output)
		}
	case formatGoTemplate:
		if _, err := parseTemplate(o.template); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--output: unsupported format %q, want one of json|yaml|go-template", o.output)
	}
	stream, err := cl.rt.GetContainerEvents(c, &runtimeapi.GetEventsRequest{})
	if err == nil {
		var ev *runtimeapi.ContainerEventResponse
		for ev, err = stream.Recv(); err == nil; ev, err = stream.Recv() {
			if perr := printEvent(s.out, ev, o.output, o.template); perr != nil {
				fmt.Fprintf(s.errOut, "failed to format container event: %v\n", perr)
			}
		}
	}
	switch {
	case err == nil, errors.Is(err, io.EOF), c.Err() != nil:
		return nil
	case status.Code(err) == codes.Unimplemented:
		return fmt.Errorf("the runtime does not support container events (CRI GetContainerEvents is unimplemented; containerd >= 1.7 has it): %s", status.Convert(err).Message())
	}
	return fmt.Errorf("getting container events: %w", err)
}

func printEvent(out io.Writer, ev *runtimeapi.ContainerEventResponse, format, tmpl string) error {
	if format != formatGoTemplate {
		return printProto(out, ev, format)
	}
	b, err := protoJSON(ev)
	if err != nil {
		return err
	}
	s, err := execTemplate(tmpl, b)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, s)
	return err
}
