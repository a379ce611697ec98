package crictl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listPods calls ListPodSandbox with the CRI-side filters (id, state, labels) and applies the
// client-side ones (name and namespace regexps, newest first, --latest/--last), as upstream does.
func listPods(c context.Context, rt runtimeapi.RuntimeServiceClient, f *listFlags) ([]*runtimeapi.PodSandbox, error) {
	filter := &runtimeapi.PodSandboxFilter{Id: f.id}
	switch strings.ToLower(f.state) {
	case "":
	case "ready":
		filter.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	case "notready":
		filter.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	default:
		return nil, fmt.Errorf("--state %q: want ready or notready", f.state)
	}
	var err error
	if filter.LabelSelector, err = f.labelSelector(); err != nil {
		return nil, err
	}
	nameRe, nsRe, err := f.matchers()
	if err != nil {
		return nil, err
	}
	resp, err := rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, p := range resp.GetItems() {
		if p.GetMetadata() != nil && matches(nameRe, p.GetMetadata().GetName()) && matches(nsRe, p.GetMetadata().GetNamespace()) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()) })
	return out[:f.limit(len(out))], nil
}

func runtimeHandler(h string) string {
	if h == "" {
		return "(default)"
	}
	return h
}

// podsCommand lists pod sandboxes: table columns POD ID, CREATED, STATE, NAME, NAMESPACE, ATTEMPT,
// RUNTIME; or -q IDs, -v details, -o json|yaml (a ListPodSandboxResponse).
func (a *app) podsCommand() *cobra.Command {
	var (
		f                       listFlags
		verbose, quiet, noTrunc bool
		output                  string
	)
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			pods, err := listPods(ctx(cmd), rt, &f)
			if err != nil {
				return fmt.Errorf("listing pod sandboxes: %w", err)
			}
			if output != formatTable {
				return printProto(a.out, &runtimeapi.ListPodSandboxResponse{Items: pods}, output)
			}
			return a.printPods(pods, verbose, quiet, noTrunc)
		},
	}
	f.add(cmd, "pod")
	cmd.Flags().StringVar(&f.id, "id", "", "filter by pod ID")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show verbose info for pods")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "list only pod IDs")
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "show output without truncating the ID")
	return cmd
}

func (a *app) printPods(pods []*runtimeapi.PodSandbox, verbose, quiet, noTrunc bool) error {
	now := time.Now()
	if quiet {
		for _, p := range pods {
			fmt.Fprintln(a.out, p.GetId())
		}
		return nil
	}
	if verbose {
		for _, p := range pods {
			md := p.GetMetadata()
			fmt.Fprintf(a.out, "ID: %s\n", p.GetId())
			printIf(a, "Name", md.GetName())
			printIf(a, "UID", md.GetUid())
			printIf(a, "Namespace", md.GetNamespace())
			if md.GetAttempt() != 0 {
				fmt.Fprintf(a.out, "Attempt: %d\n", md.GetAttempt())
			}
			fmt.Fprintf(a.out, "Status: %s\n", podState(p.GetState()))
			fmt.Fprintf(a.out, "Created: %v\n", time.Unix(0, p.GetCreatedAt()))
			printMap(a, "Labels", p.GetLabels())
			printMap(a, "Annotations", p.GetAnnotations())
			fmt.Fprintf(a.out, "Runtime: %s\n\n", runtimeHandler(p.GetRuntimeHandler()))
		}
		return nil
	}
	t := newTable(a.out)
	t.row(colPodID, colCreated, colState, colName, colNamespace, colAttempt, colRuntime)
	for _, p := range pods {
		id := p.GetId()
		if !noTrunc {
			id = truncateID(id, "")
		}
		md := p.GetMetadata()
		t.row(id, ago(p.GetCreatedAt(), now), podState(p.GetState()), md.GetName(), md.GetNamespace(),
			strconv.FormatUint(uint64(md.GetAttempt()), 10), runtimeHandler(p.GetRuntimeHandler()))
	}
	return t.flush()
}

func printIf(a *app, key, val string) {
	if val != "" {
		fmt.Fprintf(a.out, "%s: %s\n", key, val)
	}
}

func printMap(a *app, title string, m map[string]string) {
	if m == nil {
		return
	}
	fmt.Fprintf(a.out, "%s:\n", title)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(a.out, "\t%s -> %s\n", k, m[k])
	}
}

// runpCommand runs a pod sandbox from a PodSandboxConfig file and prints its ID.
func (a *app) runpCommand() *cobra.Command {
	var (
		handler       string
		cancelTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "runp pod-config.[json|yaml]",
		Short: "Run a new pod",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadPodSandboxConfig(args[0])
			if err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			// A sandbox start sets up networking; give it twice the call timeout, as upstream's client does.
			c, cancel := context.WithTimeout(ctx(cmd), cmp.Or(cancelTimeout, 2*a.cfg.Timeout))
			defer cancel()
			r, err := rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
			if err != nil {
				return fmt.Errorf("run pod sandbox: %w", err)
			}
			fmt.Fprintln(a.out, r.GetPodSandboxId())
			return nil
		},
	}
	cmd.Flags().StringVarP(&handler, "runtime", "r", "", "runtime handler to use (defined by the container runtime)")
	cmd.Flags().DurationVarP(&cancelTimeout, "cancel-timeout", "T", 0, "time to wait for the request to complete before cancelling it")
	return cmd
}

// inspectpCommand prints the PodSandboxStatus of pods named by ID prefix, or of those the filters select.
func (a *app) inspectpCommand() *cobra.Command {
	var (
		f  listFlags
		sf statusFlags
	)
	cmd := &cobra.Command{
		Use:   "inspectp [POD-ID...]",
		Short: "Display the status of one or more pods",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(sf.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			ids, err := idsOrFilter(c, rt, args, resolvePodIDs, "pod", "pod sandboxes",
				func() ([]*runtimeapi.PodSandbox, error) { return listPods(c, rt, &f) })
			if err != nil {
				return err
			}
			var docs []statusDoc
			for _, id := range ids {
				r, err := rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: !sf.quiet})
				if err != nil {
					return fmt.Errorf("get pod sandbox status of %s: %w", id, err)
				}
				if sf.output == formatTable {
					a.printPodStatus(r, !sf.quiet)
					continue
				}
				docs = append(docs, statusDoc{status: r.GetStatus(), info: r.GetInfo(), allFields: true,
					times: map[string]int64{"createdAt": r.GetStatus().GetCreatedAt()}})
			}
			return printStatus(a.out, docs, sf.output, sf.template)
		},
	}
	f.add(cmd, "pod")
	sf.add(cmd, formatJSON, "json|yaml|go-template|table")
	return cmd
}

func (a *app) printPodStatus(r *runtimeapi.PodSandboxStatusResponse, verbose bool) {
	s := r.GetStatus()
	fmt.Fprintf(a.out, "ID: %s\n", s.GetId())
	if md := s.GetMetadata(); md != nil {
		printIf(a, "Name", md.GetName())
		printIf(a, "UID", md.GetUid())
		printIf(a, "Namespace", md.GetNamespace())
		fmt.Fprintf(a.out, "Attempt: %d\n", md.GetAttempt())
	}
	fmt.Fprintf(a.out, "Status: %s\n", s.GetState())
	fmt.Fprintf(a.out, "Created: %s\n", ago(s.GetCreatedAt(), time.Now()))
	if n := s.GetNetwork(); n != nil {
		fmt.Fprintf(a.out, "IP Addresses: %s\n", n.GetIp())
		for _, ip := range n.GetAdditionalIps() {
			fmt.Fprintf(a.out, "Additional IP: %s\n", ip.GetIp())
		}
	}
	printMap(a, "Labels", s.GetLabels())
	printMap(a, "Annotations", s.GetAnnotations())
	if verbose {
		fmt.Fprintf(a.out, "Info: %v\n", r.GetInfo())
	}
}

// stoppCommand stops pod sandboxes named by ID prefix.
func (a *app) stoppCommand() *cobra.Command {
	return a.idsCommand("stopp", "POD-ID", "Stop one or more running pods", resolvePodIDs, a.stopPod)
}

func (a *app) stopPod(c context.Context, rt runtimeapi.RuntimeServiceClient, id string) error {
	if _, err := rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stopping the pod sandbox %q: %w", id, err)
	}
	fmt.Fprintf(a.out, "Stopped sandbox %s\n", id)
	return nil
}

// rmpCommand removes pod sandboxes (-a: all of them); a ready sandbox needs -f, which stops it first.
func (a *app) rmpCommand() *cobra.Command {
	var force, all bool
	cmd := &cobra.Command{
		Use:   "rmp POD-ID [POD-ID...]",
		Short: "Remove one or more pods",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !all {
				return errors.New("rmp: give POD-IDs or --all")
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			var ids []string
			if all {
				pods, err := listPods(c, rt, &listFlags{})
				if err != nil {
					return err
				}
				ids = idsOf(pods)
			} else if ids, err = resolvePodIDs(c, rt, args); err != nil {
				return err
			}
			return a.removeEach(ids, "No pods to remove", func(id string) error { return a.removePod(c, rt, id, force) })
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "force removal of the pod sandbox, disregarding if running")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "remove all pods")
	return cmd
}

func (a *app) removePod(c context.Context, rt runtimeapi.RuntimeServiceClient, id string, force bool) error {
	st, err := rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return fmt.Errorf("getting sandbox status of pod %q: %w", id, err)
	}
	if st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		if !force {
			return fmt.Errorf("pod sandbox %q is running, please stop it first (or use --force)", id)
		}
		if err := a.stopPod(c, rt, id); err != nil {
			return err
		}
	}
	if _, err := rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("removing the pod sandbox %q: %w", id, err)
	}
	fmt.Fprintf(a.out, "Removed sandbox %s\n", id)
	return nil
}
