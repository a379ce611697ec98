package crictl

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/runtime/cri"
)

// logsOptions are the options of logs.
type logsOptions struct {
	prefix                               string
	follow, timestamps, previous, reopen bool
	tail, limitBytes                     int64 // negative: all
	since                                string
	stream                               string // "stdout", "stderr" or "" for both
}

// logsCommand prints a container's log from the file the runtime writes (ContainerStatus.log_path).
func (a *app) logsCommand() *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs CONTAINER-ID",
		Short: "Fetch the logs of a container",
		Args:  cobra.ExactArgs(1),
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
			o.prefix = args[0]
			return o.run(c, cl, a.streams)
		})),
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.follow, "follow", "f", false, "follow log output")
	fl.BoolVarP(&o.previous, "previous", "p", false, "print the logs of the previous instance of the container in its pod")
	fl.BoolVarP(&o.reopen, "reopen", "r", false, "reopen the container's log file first")
	fl.Int64Var(&o.tail, "tail", -1, "number of lines to show from the end of the logs; -1 for all")
	fl.Int64Var(&o.limitBytes, "limit-bytes", -1, "maximum bytes of logs to return; -1 for no limit")
	fl.StringVar(&o.since, "since", "", "show logs since a timestamp (2013-01-02T13:23:37) or a relative time (42m)")
	fl.BoolVarP(&o.timestamps, "timestamps", "t", false, "show timestamps")
	fl.StringVarP(&o.stream, "stream", "s", "", "show only this stream (stdout or stderr); default both")
	return cmd
}

// run finds the container's log file and prints it (stdout lines to s.out, stderr lines to s.errOut)
// with k8s.io/cri-client's reader, as the kubelet serves logs; with --follow until the container stops
// or c ends.
func (o *logsOptions) run(c context.Context, cl criClient, s streams) error {
	opts, err := o.logOptions(time.Now())
	if err != nil {
		return err
	}
	stdout, stderr := s.out, s.errOut
	switch o.stream {
	case "":
	case "stdout":
		stderr = nil
	case "stderr":
		stdout = nil
	default:
		return fmt.Errorf(`--stream %q: want "stdout" or "stderr"`, o.stream)
	}
	id, err := resolveContainerID(c, cl.rt, o.prefix)
	if err != nil {
		return err
	}
	if o.reopen {
		if _, err := cl.rt.ReopenContainerLog(c, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
			return fmt.Errorf("reopen container logs: %w", err)
		}
	}
	st, err := cl.rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return err
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		return fmt.Errorf("container %s has no log path", id)
	}
	if o.previous {
		attempt := st.GetStatus().GetMetadata().GetAttempt()
		if attempt == 0 {
			return fmt.Errorf("previous terminated container %s not found", st.GetStatus().GetMetadata().GetName())
		}
		path = previousLogPath(path, attempt)
	}
	// The reader logs through klog; route that to crictl's logger (shown with --debug).
	rc := klog.NewContext(c, logr.FromSlogHandler(slog.Default().Handler()))
	if err := cri.ReadLogs(rc, path, id, opts, cl.rt, stdout, stderr); err != nil && c.Err() == nil {
		return err
	}
	return nil
}

// logOptions turns the flags into cri-client's options: negative --tail and --limit-bytes mean all.
func (o *logsOptions) logOptions(now time.Time) (*logs.LogOptions, error) {
	since, err := parseSince(o.since, now)
	if err != nil {
		return nil, err
	}
	opts := &logs.LogOptions{Since: since, Follow: o.follow, Timestamp: o.timestamps}
	if o.tail >= 0 {
		opts.TailLines = &o.tail
	}
	if o.limitBytes >= 0 {
		opts.LimitBytes = &o.limitBytes
	}
	return opts, nil
}

// parseSince accepts an RFC 3339 timestamp (with or without zone, e.g. 2013-01-02T13:23:37), or a
// duration relative to now (42m, 1h30m).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 timestamp (2013-01-02T13:23:37) or a duration (42m)", s)
}

// previousLogPath names the log file of the previous attempt: ".../<attempt-1>.log" next to path.
func previousLogPath(path string, attempt uint32) string {
	return filepath.Join(filepath.Dir(path), strconv.FormatUint(uint64(attempt-1), 10)+filepath.Ext(path))
}
