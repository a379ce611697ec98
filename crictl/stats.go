package crictl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statsFlags are the options of stats and statsp: the ID prefix argument and the flags.
type statsFlags struct {
	prefix, id, pod, output string
	labels                  []string
	seconds                 int
	watch, all              bool
}

func (f *statsFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "filter by ID")
	fl.StringArrayVar(&f.labels, "label", nil, "filter by key=value label (repeatable)")
	fl.StringVarP(&f.output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	fl.IntVarP(&f.seconds, "seconds", "s", 1, "sample duration for CPU usage in seconds")
	fl.BoolVarP(&f.watch, "watch", "w", false, "watch the stats until interrupted")
}

// watchLoop runs show once, or with --watch repeatedly until ctx ends.
func watchLoop(c context.Context, watch bool, show func() error) error {
	for {
		if err := show(); err != nil {
			return err
		}
		if !watch {
			return nil
		}
		select {
		case <-c.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// statsView is what differs between stats and statsp: the stats message S, how to list and identify
// it, the list response it is printed as with -o json|yaml, and the table.
type statsView[S any] struct {
	what    string
	list    func() ([]S, error)
	id      func(S) string
	asProto func([]S) proto.Message
	header  []string
	// row renders cur given the sample taken --seconds before (ok false when there is none); nil cells
	// leave cur out.
	row func(prev S, ok bool, cur S) (cells []string, err error)
}

// show prints the stats once, or with --watch repeatedly until c ends: the first sample as a list
// response for -o json|yaml; else a table of a second sample taken --seconds later, CPU % being the use
// between the two.
func (v statsView[S]) show(c context.Context, f *statsFlags, out io.Writer) error {
	if f.seconds < 1 {
		return fmt.Errorf("--seconds %d: the CPU sample needs at least 1 second", f.seconds)
	}
	return watchLoop(c, f.watch, func() error {
		first, err := v.list()
		if err != nil {
			return fmt.Errorf("listing %s: %w", v.what, err)
		}
		if f.output != formatTable {
			return printProto(out, v.asProto(first), f.output)
		}
		time.Sleep(time.Duration(f.seconds) * time.Second)
		second, err := v.list()
		if err != nil {
			return fmt.Errorf("listing %s: %w", v.what, err)
		}
		prev := make(map[string]S, len(first))
		for _, s := range first {
			prev[v.id(s)] = s
		}
		t := newTable(out)
		t.row(v.header...)
		for _, s := range second {
			old, ok := prev[v.id(s)]
			cells, err := v.row(old, ok, s)
			if err != nil {
				return err
			}
			if cells != nil {
				t.row(cells...)
			}
		}
		return t.flush()
	})
}

// selector validates -o and returns the --label selector.
func (f *statsFlags) selector() (map[string]string, error) {
	if err := checkFormat(f.output, formatTable, formatJSON, formatYAML); err != nil {
		return nil, err
	}
	return (&listFlags{labels: f.labels}).labelSelector()
}

// cpuPercent is the CPU use between two cumulative usage samples, in percent of one core.
func cpuPercent(prev, cur *runtimeapi.CpuUsage) (float64, error) {
	if cur.GetUsageCoreNanoSeconds().GetValue() == 0 {
		return 0, nil
	}
	dt := cur.GetTimestamp() - prev.GetTimestamp()
	if dt <= 0 {
		return 0, errors.New("cpu stat is not updated during sample")
	}
	return float64(cur.GetUsageCoreNanoSeconds().GetValue()-prev.GetUsageCoreNanoSeconds().GetValue()) / float64(dt) * 100, nil
}

// statsCommand shows container resource usage: CONTAINER, NAME, CPU %, MEM, DISK, INODES, SWAP, with
// CPU % measured over --seconds between two ListContainerStats samples.
func (a *app) statsCommand() *cobra.Command {
	var o statsFlags
	cmd := &cobra.Command{
		Use:   "stats [CONTAINER-ID]",
		Short: "List container(s) resource usage statistics",
		Args:  cobra.MaximumNArgs(1),
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
			o.prefix = optionalArg(args)
			return containerStats(c, cl, &o, a.out)
		})),
	}
	o.add(cmd)
	cmd.Flags().StringVarP(&o.pod, "pod", "p", "", "filter by pod ID (a prefix is enough)")
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "show all containers (default shows just running)")
	return cmd
}

// containerStats prints the selected containers' usage, once or with --watch until c ends.
func containerStats(c context.Context, cl criClient, o *statsFlags, out io.Writer) error {
	labels, err := o.selector()
	if err != nil {
		return err
	}
	filter := &runtimeapi.ContainerStatsFilter{Id: o.id, LabelSelector: labels}
	if o.prefix != "" && o.id == "" {
		if filter.Id, err = resolveContainerID(c, cl.rt, o.prefix); err != nil {
			return err
		}
	}
	if o.pod != "" {
		if filter.PodSandboxId, err = resolvePodID(c, cl.rt, o.pod); err != nil {
			return err
		}
	}
	return statsView[*runtimeapi.ContainerStats]{
		what: "container stats",
		list: func() ([]*runtimeapi.ContainerStats, error) {
			r, err := cl.rt.ListContainerStats(c, &runtimeapi.ListContainerStatsRequest{Filter: filter})
			return r.GetStats(), err
		},
		id: func(s *runtimeapi.ContainerStats) string { return s.GetAttributes().GetId() },
		asProto: func(ss []*runtimeapi.ContainerStats) proto.Message {
			return &runtimeapi.ListContainerStatsResponse{Stats: ss}
		},
		header: []string{colContainer, colName, colCPU, colMem, colDisk, colInodes, colSwap},
		row: func(prev *runtimeapi.ContainerStats, ok bool, s *runtimeapi.ContainerStats) ([]string, error) {
			mem := s.GetMemory().GetWorkingSetBytes().GetValue()
			if !o.all && s.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 && mem == 0 {
				return nil, nil
			}
			var pct float64
			if ok {
				if pct, err = cpuPercent(prev.GetCpu(), s.GetCpu()); err != nil {
					return nil, err
				}
			}
			return []string{truncateID(s.GetAttributes().GetId(), ""), s.GetAttributes().GetMetadata().GetName(),
				fmt.Sprintf("%.2f", pct), humanSize(float64(mem), 4),
				humanSize(float64(s.GetWritableLayer().GetUsedBytes().GetValue()), 4),
				strconv.FormatUint(s.GetWritableLayer().GetInodesUsed().GetValue(), 10),
				humanSize(float64(s.GetSwap().GetSwapUsageBytes().GetValue()), 4)}, nil
		},
	}.show(c, o, out)
}

// statspCommand shows pod sandbox resource usage: POD, POD ID, CPU %, MEM.
func (a *app) statspCommand() *cobra.Command {
	var o statsFlags
	cmd := &cobra.Command{
		Use:   "statsp [POD-ID]",
		Args:  cobra.MaximumNArgs(1),
		Short: "List pod statistics. Stats represent a structured API that will fulfill the Kubelet's /stats/summary endpoint.",
		RunE: a.runE(untilSignal(func(c context.Context, cl criClient, args []string) error {
			o.prefix = optionalArg(args)
			return podStats(c, cl, &o, a.out)
		})),
	}
	o.add(cmd)
	return cmd
}

// podStats prints the selected pods' usage, once or with --watch until c ends.
func podStats(c context.Context, cl criClient, o *statsFlags, out io.Writer) error {
	labels, err := o.selector()
	if err != nil {
		return err
	}
	filter := &runtimeapi.PodSandboxStatsFilter{Id: o.id, LabelSelector: labels}
	if o.prefix != "" && o.id == "" {
		if filter.Id, err = resolvePodID(c, cl.rt, o.prefix); err != nil {
			return err
		}
	}
	return statsView[*runtimeapi.PodSandboxStats]{
		what: "pod sandbox stats",
		list: func() ([]*runtimeapi.PodSandboxStats, error) {
			r, err := cl.rt.ListPodSandboxStats(c, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
			return r.GetStats(), err
		},
		id: func(s *runtimeapi.PodSandboxStats) string { return s.GetAttributes().GetId() },
		asProto: func(ss []*runtimeapi.PodSandboxStats) proto.Message {
			return &runtimeapi.ListPodSandboxStatsResponse{Stats: ss}
		},
		header: []string{colPod, colPodID, colCPU, colMem},
		row: func(prev *runtimeapi.PodSandboxStats, ok bool, s *runtimeapi.PodSandboxStats) ([]string, error) {
			l := s.GetLinux()
			mem := l.GetMemory().GetWorkingSetBytes().GetValue()
			if l.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 && mem == 0 {
				return nil, nil
			}
			var pct float64
			if ok {
				if pct, err = cpuPercent(prev.GetLinux().GetCpu(), l.GetCpu()); err != nil {
					return nil, err
				}
			}
			return []string{s.GetAttributes().GetMetadata().GetName(), truncateID(s.GetAttributes().GetId(), ""),
				fmt.Sprintf("%.2f", pct), humanSize(float64(mem), 4)}, nil
		},
	}.show(c, o, out)
}
