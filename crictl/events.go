package crictl

import (
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
	var output, tmpl string
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "Stream the events of containers",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case formatJSON, formatYAML:
				if tmpl != "" {
					return fmt.Errorf("--template can't be used with %q format", output)
				}
			case formatGoTemplate:
				if _, err := parseTemplate(tmpl); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--output: unsupported format %q, want one of json|yaml|go-template", output)
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c, cancel := signalContext(cmd)
			defer cancel()
			stream, err := rt.GetContainerEvents(c, &runtimeapi.GetEventsRequest{})
			if err == nil {
				var ev *runtimeapi.ContainerEventResponse
				for ev, err = stream.Recv(); err == nil; ev, err = stream.Recv() {
					if perr := a.printEvent(ev, output, tmpl); perr != nil {
						fmt.Fprintf(a.errOut, "failed to format container event: %v\n", perr)
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
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatJSON, "output format, one of: json|yaml|go-template")
	cmd.Flags().StringVar(&tmpl, "template", "", "Go template used with -o go-template")
	return cmd
}

func (a *app) printEvent(ev *runtimeapi.ContainerEventResponse, format, tmpl string) error {
	if format != formatGoTemplate {
		return printProto(a.out, ev, format)
	}
	b, err := protoJSON(ev)
	if err != nil {
		return err
	}
	s, err := execTemplate(tmpl, b)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.out, s)
	return err
}
