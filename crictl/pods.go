package crictl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
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

// podsOptions are the options of pods.
type podsOptions struct {
	listFlags
	verbose, quiet, noTrunc bool
	output                  string
}

// podsCommand lists pod sandboxes: table columns POD ID, CREATED, STATE, NAME, NAMESPACE, ATTEMPT,
// RUNTIME; or -q IDs, -v details, -o json|yaml (a ListPodSandboxResponse).
func (a *app) podsCommand() *cobra.Command {
	var o podsOptions
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List pods",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return o.run(c, cl, a.out)
		}),
	}
	o.add(cmd, "pod")
	cmd.Flags().StringVar(&o.id, "id", "", "filter by pod ID")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "show verbose info for pods")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "list only pod IDs")
	cmd.Flags().StringVarP(&o.output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	cmd.Flags().BoolVar(&o.noTrunc, "no-trunc", false, "show output without truncating the ID")
	return cmd
}

// run lists the pods the filters select and prints them.
func (o *podsOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatTable, formatJSON, formatYAML); err != nil {
		return err
	}
	pods, err := listPods(c, cl.rt, &o.listFlags)
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	if o.output != formatTable {
		return printProto(out, &runtimeapi.ListPodSandboxResponse{Items: pods}, o.output)
	}
	return o.print(out, pods)
}

func (o *podsOptions) print(out io.Writer, pods []*runtimeapi.PodSandbox) error {
	now := time.Now()
	if o.quiet {
		for _, p := range pods {
			fmt.Fprintln(out, p.GetId())
		}
		return nil
	}
	if o.verbose {
		for _, p := range pods {
			md := p.GetMetadata()
			fmt.Fprintf(out, "ID: %s\n", p.GetId())
			printIf(out, "Name", md.GetName())
			printIf(out, "UID", md.GetUid())
			printIf(out, "Namespace", md.GetNamespace())
			if md.GetAttempt() != 0 {
				fmt.Fprintf(out, "Attempt: %d\n", md.GetAttempt())
			}
			fmt.Fprintf(out, "Status: %s\n", podState(p.GetState()))
			fmt.Fprintf(out, "Created: %v\n", time.Unix(0, p.GetCreatedAt()))
			printMap(out, "Labels", p.GetLabels())
			printMap(out, "Annotations", p.GetAnnotations())
			fmt.Fprintf(out, "Runtime: %s\n\n", runtimeHandler(p.GetRuntimeHandler()))
		}
		return nil
	}
	t := newTable(out)
	t.row(colPodID, colCreated, colState, colName, colNamespace, colAttempt, colRuntime)
	for _, p := range pods {
		id := p.GetId()
		if !o.noTrunc {
			id = truncateID(id, "")
		}
		md := p.GetMetadata()
		t.row(id, ago(p.GetCreatedAt(), now), podState(p.GetState()), md.GetName(), md.GetNamespace(),
			strconv.FormatUint(uint64(md.GetAttempt()), 10), runtimeHandler(p.GetRuntimeHandler()))
	}
	return t.flush()
}

// printIf prints "key: val" unless val is empty.
func printIf(out io.Writer, key, val string) {
	if val != "" {
		fmt.Fprintf(out, "%s: %s\n", key, val)
	}
}

// printMap prints a title line and one tab-indented "k -> v" line per entry, keys sorted; nothing for a
// nil map.
func printMap(out io.Writer, title string, m map[string]string) {
	if m == nil {
		return
	}
	fmt.Fprintf(out, "%s:\n", title)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "\t%s -> %s\n", k, m[k])
	}
}

// runpOptions are the options of runp.
type runpOptions struct {
	configPath, handler string
	// timeout bounds the RunPodSandbox call.
	timeout time.Duration
}

// runpCommand runs a pod sandbox from a PodSandboxConfig file and prints its ID.
func (a *app) runpCommand() *cobra.Command {
	var o runpOptions
	cmd := &cobra.Command{
		Use:   "runp pod-config.[json|yaml]",
		Short: "Run a new pod",
		Args:  cobra.ExactArgs(1),
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			// A sandbox start sets up networking; give it twice the call timeout, as upstream's client does.
			o.configPath, o.timeout = args[0], cmp.Or(o.timeout, 2*a.cfg.Timeout)
			return o.run(c, cl, a.out)
		}),
	}
	cmd.Flags().StringVarP(&o.handler, "runtime", "r", "", "runtime handler to use (defined by the container runtime)")
	cmd.Flags().DurationVarP(&o.timeout, "cancel-timeout", "T", 0, "time to wait for the request to complete before cancelling it")
	cmd.AddCommand(a.jsonschemaCommand(false))
	return cmd
}

// run reads the pod config and runs the sandbox.
func (o *runpOptions) run(c context.Context, cl criClient, out io.Writer) error {
	cfg, err := loadPodSandboxConfig(o.configPath)
	if err != nil {
		return err
	}
	id, err := runPodSandbox(c, cl, cfg, o.handler, o.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, id)
	return nil
}

// runPodSandbox runs a sandbox from cfg with runtime handler (empty: the runtime's default), the call
// bounded by timeout, and returns its ID.
func runPodSandbox(c context.Context, cl criClient, cfg *runtimeapi.PodSandboxConfig, handler string, timeout time.Duration) (string, error) {
	c, cancel := context.WithTimeout(c, timeout)
	defer cancel()
	r, err := cl.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		return "", fmt.Errorf("run pod sandbox: %w", err)
	}
	return r.GetPodSandboxId(), nil
}

// inspectpOptions are the options of inspectp: the pods by ID prefix, or else those the filters select.
type inspectpOptions struct {
	listFlags
	statusFlags
	prefixes []string
}

// inspectpCommand prints the PodSandboxStatus of pods named by ID prefix, or of those the filters select.
func (a *app) inspectpCommand() *cobra.Command {
	var o inspectpOptions
	cmd := &cobra.Command{
		Use:   "inspectp [POD-ID...]",
		Short: "Display the status of one or more pods",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes = args
			return o.run(c, cl, a.out)
		}),
	}
	o.listFlags.add(cmd, "pod")
	o.statusFlags.add(cmd, formatJSON, "json|yaml|go-template|table")
	return cmd
}

// run prints the status of each selected pod.
func (o *inspectpOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
		return err
	}
	ids, err := idsOrFilter(c, cl.rt, o.prefixes, resolvePodIDs, "pod", "pod sandboxes",
		func() ([]*runtimeapi.PodSandbox, error) { return listPods(c, cl.rt, &o.listFlags) })
	if err != nil {
		return err
	}
	return printInspected(out, &o.statusFlags, ids, func(id string) (inspected, error) {
		r, err := cl.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: !o.quiet})
		if err != nil {
			return inspected{}, fmt.Errorf("get pod sandbox status of %s: %w", id, err)
		}
		return inspected{
			table: func(out io.Writer) { printPodStatus(out, r, !o.quiet) },
			doc: statusDoc{status: r.GetStatus(), info: r.GetInfo(), allFields: true,
				times: map[string]time.Time{"createdAt": time.Unix(0, r.GetStatus().GetCreatedAt())}},
		}, nil
	})
}

func printPodStatus(out io.Writer, r *runtimeapi.PodSandboxStatusResponse, verbose bool) {
	s := r.GetStatus()
	fmt.Fprintf(out, "ID: %s\n", s.GetId())
	if md := s.GetMetadata(); md != nil {
		printIf(out, "Name", md.GetName())
		printIf(out, "UID", md.GetUid())
		printIf(out, "Namespace", md.GetNamespace())
		fmt.Fprintf(out, "Attempt: %d\n", md.GetAttempt())
	}
	fmt.Fprintf(out, "Status: %s\n", s.GetState())
	fmt.Fprintf(out, "Created: %s\n", ago(s.GetCreatedAt(), time.Now()))
	if n := s.GetNetwork(); n != nil {
		fmt.Fprintf(out, "IP Addresses: %s\n", n.GetIp())
		for _, ip := range n.GetAdditionalIps() {
			fmt.Fprintf(out, "Additional IP: %s\n", ip.GetIp())
		}
	}
	printMap(out, "Labels", s.GetLabels())
	printMap(out, "Annotations", s.GetAnnotations())
	if verbose {
		fmt.Fprintf(out, "Info: %v\n", r.GetInfo())
	}
}

// stoppCommand stops pod sandboxes named by ID prefix.
func (a *app) stoppCommand() *cobra.Command {
	return a.idsCommand("stopp", "POD-ID", "Stop one or more running pods", func(c context.Context, cl criClient, args []string) error {
		return forEachID(c, cl.rt, resolvePodIDs, args, func(id string) error { return stopPod(c, cl, id, a.out) })
	})
}

// stopPod stops one sandbox and prints "Stopped sandbox ID".
func stopPod(c context.Context, cl criClient, id string, out io.Writer) error {
	if _, err := cl.rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stopping the pod sandbox %q: %w", id, err)
	}
	fmt.Fprintf(out, "Stopped sandbox %s\n", id)
	return nil
}

// rmpOptions are the options of rmp: the pods by ID prefix, or all of them.
type rmpOptions struct {
	prefixes   []string
	force, all bool
}

// rmpCommand removes pod sandboxes (-a: all of them); a ready sandbox needs -f, which stops it first.
func (a *app) rmpCommand() *cobra.Command {
	var o rmpOptions
	cmd := &cobra.Command{
		Use:   "rmp POD-ID [POD-ID...]",
		Short: "Remove one or more pods",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes = args
			return o.run(c, cl, a.streams)
		}),
	}
	cmd.Flags().BoolVarP(&o.force, "force", "f", false, "force removal of the pod sandbox, disregarding if running")
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "remove all pods")
	return cmd
}

// run removes every selected pod, reporting all failures together.
func (o *rmpOptions) run(c context.Context, cl criClient, s streams) error {
	if len(o.prefixes) == 0 && !o.all {
		return errors.New("rmp: give POD-IDs or --all")
	}
	var ids []string
	if o.all {
		pods, err := listPods(c, cl.rt, &listFlags{})
		if err != nil {
			return err
		}
		ids = idsOf(pods)
	} else {
		var err error
		if ids, err = resolvePodIDs(c, cl.rt, o.prefixes); err != nil {
			return err
		}
	}
	return removeEach(s.errOut, ids, "No pods to remove", func(id string) error { return o.remove(c, cl, id, s.out) })
}

func (o *rmpOptions) remove(c context.Context, cl criClient, id string, out io.Writer) error {
	st, err := cl.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return fmt.Errorf("getting sandbox status of pod %q: %w", id, err)
	}
	if st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		if !o.force {
			return fmt.Errorf("pod sandbox %q is running, please stop it first (or use --force)", id)
		}
		if err := stopPod(c, cl, id, out); err != nil {
			return err
		}
	}
	if _, err := cl.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("removing the pod sandbox %q: %w", id, err)
	}
	fmt.Fprintf(out, "Removed sandbox %s\n", id)
	return nil
}
