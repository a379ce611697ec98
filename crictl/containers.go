package crictl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet sets on CRI containers; ps shows the pod's name and namespace from them.
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
)

func labelOrUnknown(labels map[string]string, key string) string {
	if v, ok := labels[key]; ok {
		return v
	}
	return "unknown"
}

// psFilter is ps/inspect's selection: listFlags plus --pod, --image and --all.
type psFilter struct {
	listFlags
	pod, image string
	all        bool
}

// listContainers calls ListContainers with the CRI-side filters (id, pod, state, labels; running only
// unless --all, --state, --latest or --last) and applies the client-side ones (name, namespace, image),
// newest first, as upstream does. --pod accepts an ID prefix.
func listContainers(c context.Context, rt runtimeapi.RuntimeServiceClient, img runtimeapi.ImageServiceClient, f *psFilter) ([]*runtimeapi.Container, error) {
	filter := &runtimeapi.ContainerFilter{Id: f.id}
	if f.pod != "" {
		id, err := resolvePodID(c, rt, f.pod)
		if err != nil {
			return nil, fmt.Errorf("--pod: %w", err)
		}
		filter.PodSandboxId = id
	}
	state := func(s runtimeapi.ContainerState) { filter.State = &runtimeapi.ContainerStateValue{State: s} }
	switch strings.ToLower(f.state) {
	case "":
		if !f.all {
			state(runtimeapi.ContainerState_CONTAINER_RUNNING)
		}
	case "created":
		state(runtimeapi.ContainerState_CONTAINER_CREATED)
	case "running":
		state(runtimeapi.ContainerState_CONTAINER_RUNNING)
	case "exited":
		state(runtimeapi.ContainerState_CONTAINER_EXITED)
	case "unknown":
		state(runtimeapi.ContainerState_CONTAINER_UNKNOWN)
	default:
		return nil, fmt.Errorf("--state %q: want one of created, running, exited or unknown", f.state)
	}
	if f.latest || f.last > 0 {
		filter.State = nil
	}
	var err error
	if filter.LabelSelector, err = f.labelSelector(); err != nil {
		return nil, err
	}
	nameRe, nsRe, err := f.matchers()
	if err != nil {
		return nil, err
	}
	resp, err := rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	imageMatch, err := imageMatcher(c, img, f.image)
	if err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, ctr := range resp.GetContainers() {
		if ctr.GetMetadata() == nil || !matches(nameRe, ctr.GetMetadata().GetName()) ||
			!matches(nsRe, labelOrUnknown(ctr.GetLabels(), labelPodNamespace)) {
			continue
		}
		ok, err := imageMatch(ctr)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ctr)
		}
	}
	slices.SortStableFunc(out, func(a, b *runtimeapi.Container) int { return cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()) })
	return out[:f.limit(len(out))], nil
}

// imageMatcher returns a predicate selecting containers whose image is the same image (same image ID)
// as ref; with an empty ref every container matches.
func imageMatcher(c context.Context, img runtimeapi.ImageServiceClient, ref string) (func(*runtimeapi.Container) (bool, error), error) {
	if ref == "" {
		return func(*runtimeapi.Container) (bool, error) { return true, nil }, nil
	}
	idOf := map[string]string{}
	imageID := func(r string) (string, error) {
		if id, ok := idOf[r]; ok {
			return id, nil
		}
		st, err := img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: r}})
		if err != nil {
			return "", fmt.Errorf("image status of %q: %w", r, err)
		}
		idOf[r] = st.GetImage().GetId()
		return idOf[r], nil
	}
	want, err := imageID(ref)
	if err != nil {
		return nil, fmt.Errorf("--image: %w", err)
	}
	if want == "" {
		return func(*runtimeapi.Container) (bool, error) { return false, nil }, nil
	}
	return func(ctr *runtimeapi.Container) (bool, error) {
		if ctr.GetImageRef() == want || ctr.GetImage().GetImage() == want {
			return true, nil
		}
		id, err := imageID(ctr.GetImage().GetImage())
		return id == want, err
	}, nil
}

// shortImage truncates an image given as a digest ("sha256:<hex>", what the kubelet passes) to 13 hex
// characters; image names are kept.
func shortImage(image string) string {
	if alg, hex, ok := strings.Cut(image, ":"); ok && alg == "sha256" && len(hex) == 64 && !strings.Contains(hex, "/") {
		return truncateID(hex, "")
	}
	return image
}

// psOptions are the options of ps.
type psOptions struct {
	psFilter
	verbose, quiet, noTrunc, resolveImage bool
	output                                string
}

// psCommand lists containers: table columns CONTAINER, IMAGE, CREATED, STATE, NAME, ATTEMPT, POD ID,
// POD, NAMESPACE; or -q IDs, -v details, -o json|yaml (a ListContainersResponse).
func (a *app) psCommand() *cobra.Command {
	var o psOptions
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List containers",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return o.run(c, cl, a.out)
		}),
	}
	o.add(cmd, "container")
	fl := cmd.Flags()
	fl.StringVar(&o.id, "id", "", "filter by container ID")
	fl.StringVarP(&o.pod, "pod", "p", "", "filter by pod ID (a prefix is enough)")
	fl.StringVar(&o.image, "image", "", "filter by container image")
	fl.BoolVarP(&o.all, "all", "a", false, "show all containers, not only running ones")
	fl.BoolVarP(&o.verbose, "verbose", "v", false, "show verbose information for containers")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "only display container IDs")
	fl.StringVarP(&o.output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	fl.BoolVar(&o.noTrunc, "no-trunc", false, "show output without truncating the ID")
	fl.BoolVarP(&o.resolveImage, "resolve-image-path", "r", false, "show the image's first repo tag instead of its ID")
	return cmd
}

// run lists the containers the filters select and prints them.
func (o *psOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatTable, formatJSON, formatYAML); err != nil {
		return err
	}
	ctrs, err := listContainers(c, cl.rt, cl.img, &o.psFilter)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	if o.output != formatTable {
		return printProto(out, &runtimeapi.ListContainersResponse{Containers: ctrs}, o.output)
	}
	return o.print(c, cl.img, out, ctrs)
}

func (o *psOptions) print(c context.Context, img runtimeapi.ImageServiceClient, out io.Writer, ctrs []*runtimeapi.Container) error {
	now := time.Now()
	if o.quiet {
		for _, ctr := range ctrs {
			fmt.Fprintln(out, ctr.GetId())
		}
		return nil
	}
	if o.verbose {
		for _, ctr := range ctrs {
			fmt.Fprintf(out, "ID: %s\nPodID: %s\nNamespace: %s\n", ctr.GetId(), ctr.GetPodSandboxId(), labelOrUnknown(ctr.GetLabels(), labelPodNamespace))
			if md := ctr.GetMetadata(); md != nil {
				printIf(out, "Name", md.GetName())
				fmt.Fprintf(out, "Attempt: %d\n", md.GetAttempt())
			}
			fmt.Fprintf(out, "State: %s\n", containerState(ctr.GetState()))
			fmt.Fprintf(out, "Image: %s\n", ctr.GetImage().GetImage())
			fmt.Fprintf(out, "Created: %s\n", ago(ctr.GetCreatedAt(), now))
			printMap(out, "Labels", ctr.GetLabels())
			printMap(out, "Annotations", ctr.GetAnnotations())
			fmt.Fprintln(out)
		}
		return nil
	}
	t := newTable(out)
	t.row(colContainer, colImage, colCreated, colState, colName, colAttempt, colPodID, colPod, colNamespace)
	for _, ctr := range ctrs {
		id, podID, image := ctr.GetId(), ctr.GetPodSandboxId(), ctr.GetImage().GetImage()
		if !o.noTrunc {
			id, podID, image = truncateID(id, ""), truncateID(podID, ""), shortImage(image)
		}
		if o.resolveImage {
			st, err := img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ctr.GetImage().GetImage()}})
			if err != nil {
				return fmt.Errorf("resolving image of container %s: %w", ctr.GetId(), err)
			}
			if tags := st.GetImage().GetRepoTags(); len(tags) > 0 {
				image = tags[0]
			}
		}
		md := ctr.GetMetadata()
		t.row(id, image, ago(ctr.GetCreatedAt(), now), containerState(ctr.GetState()), md.GetName(),
			strconv.FormatUint(uint64(md.GetAttempt()), 10), podID,
			labelOrUnknown(ctr.GetLabels(), labelPodName), labelOrUnknown(ctr.GetLabels(), labelPodNamespace))
	}
	return t.flush()
}

// containerPull is how create and run decide whether to pull the container's images first: --no-pull,
// --with-pull, the credentials and deadline flags, and the config file's default.
type containerPull struct {
	noPull, withPull bool
	// byDefault is the config file's choice when neither flag is given: pull-image-on-create for
	// create, not disable-pull-on-run for run.
	byDefault bool
	pull      pullFlags
}

func (p *containerPull) add(cmd *cobra.Command, noPullUsage, withPullUsage string) {
	cmd.Flags().BoolVar(&p.noPull, "no-pull", false, noPullUsage)
	cmd.Flags().BoolVar(&p.withPull, "with-pull", false, withPullUsage)
	p.pull.add(cmd)
}

// wanted reports whether to pull; both flags together are an error.
func (p *containerPull) wanted() (bool, error) {
	if p.noPull && p.withPull {
		return false, errors.New("conflict: --no-pull and --with-pull are both set")
	}
	return p.withPull || (p.byDefault && !p.noPull), nil
}

// load checks the pull flags and reads the container and pod config files: whether to pull, and the
// two configs.
func (p *containerPull) load(ctrPath, podPath string) (bool, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	pull, err := p.wanted()
	if err != nil {
		return false, nil, nil, err
	}
	ctrCfg, err := loadContainerConfig(ctrPath)
	if err != nil {
		return false, nil, nil, err
	}
	podCfg, err := loadPodSandboxConfig(podPath)
	if err != nil {
		return false, nil, nil, err
	}
	return pull, ctrCfg, podCfg, nil
}

// createOptions are the options of create.
type createOptions struct {
	podPrefix, containerConfig, podConfig string
	containerPull
	// timeout bounds the CreateContainer call.
	timeout time.Duration
}

// createCommand creates a container in a pod from a ContainerConfig and the pod's PodSandboxConfig and
// prints its ID. With --with-pull (or pull-image-on-create in the config file) the image is pulled first.
func (a *app) createCommand() *cobra.Command {
	var o createOptions
	cmd := &cobra.Command{
		Use:   "create POD container-config.[json|yaml] pod-config.[json|yaml]",
		Short: "Create a new container",
		Args:  cobra.ExactArgs(3),
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.podPrefix, o.containerConfig, o.podConfig = args[0], args[1], args[2]
			o.byDefault, o.timeout = a.cfg.PullImageOnCreate, cmp.Or(o.timeout, a.cfg.Timeout)
			o.pull.in, o.pull.prompt = a.in, a.errOut
			return o.run(c, cl, a.streams)
		}),
	}
	o.containerPull.add(cmd, "do not pull the image (overrides pull-image-on-create=true in the config file)",
		"pull the image before creating the container (overrides pull-image-on-create=false in the config file)")
	cmd.Flags().DurationVarP(&o.timeout, "cancel-timeout", "T", 0, "time to wait for the request to complete before cancelling it")
	cmd.AddCommand(a.jsonschemaCommand(true))
	return cmd
}

// run reads both configs, pulls the image if asked, and creates the container.
func (o *createOptions) run(c context.Context, cl criClient, s streams) error {
	pull, ctrCfg, podCfg, err := o.load(o.containerConfig, o.podConfig)
	if err != nil {
		return err
	}
	podID, err := resolvePodID(c, cl.rt, o.podPrefix)
	if err != nil {
		return err
	}
	id, err := createContainer(c, cl, s, podID, ctrCfg, podCfg, pull, &o.pull, o.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.out, id)
	return nil
}

// createContainer pulls the container's image and the images of its image volumes when pull is set,
// then creates the container in pod podID (the call bounded by timeout) and returns its ID.
func createContainer(c context.Context, cl criClient, s streams, podID string, ctrCfg *runtimeapi.ContainerConfig,
	podCfg *runtimeapi.PodSandboxConfig, pull bool, f *pullFlags, timeout time.Duration) (string, error) {
	if pull {
		refs := []string{ctrCfg.GetImage().GetImage()}
		for _, m := range ctrCfg.GetMounts() {
			if ref := m.GetImage().GetImage(); ref != "" {
				refs = append(refs, ref)
			}
		}
		pf := *f
		pf.annotations = ctrCfg.GetImage().GetAnnotations()
		for _, ref := range refs {
			if _, err := pullImage(c, cl.img, s.errOut, ref, &pf, podCfg); err != nil {
				return "", err
			}
		}
	}
	cc, cancel := context.WithTimeout(c, timeout)
	defer cancel()
	r, err := cl.rt.CreateContainer(cc, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: ctrCfg, SandboxConfig: podCfg})
	if err != nil {
		return "", fmt.Errorf("creating container: %w", err)
	}
	return r.GetContainerId(), nil
}

// runOptions are the options of run: a pod, and a container in it, from their config files.
type runOptions struct {
	containerConfig, podConfig, handler string
	containerPull
	// timeout bounds the CreateContainer call; the sandbox gets runTimeout.
	timeout, runTimeout time.Duration
}

// runCommand runs a pod sandbox and a container in it in one step (runp, create and start), printing
// the container's ID. The image is pulled first unless --no-pull or disable-pull-on-run in the config
// file.
func (a *app) runCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run container-config.[json|yaml] pod-config.[json|yaml]",
		Short: "Run a new container inside a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.containerConfig, o.podConfig = args[0], args[1]
			o.byDefault, o.timeout, o.runTimeout = !a.cfg.DisablePullOnRun, cmp.Or(o.timeout, a.cfg.Timeout), 2*a.cfg.Timeout
			o.pull.in, o.pull.prompt = a.in, a.errOut
			return o.run(c, cl, a.streams)
		}),
	}
	o.containerPull.add(cmd, "do not pull the image (overrides disable-pull-on-run=false in the config file)",
		"pull the image (overrides disable-pull-on-run=true in the config file)")
	cmd.Flags().StringVarP(&o.handler, "runtime", "r", "", "runtime handler to use (defined by the container runtime)")
	cmd.Flags().DurationVarP(&o.timeout, "cancel-timeout", "T", 0, "time to wait for the container create request to complete before cancelling it")
	cmd.AddCommand(a.jsonschemaCommand(true))
	return cmd
}

// run reads both configs, runs the sandbox, creates the container (pulling first if asked) and starts
// it. A failure after the sandbox runs names the sandbox, which is left for the user to inspect or
// remove, as upstream leaves it.
func (o *runOptions) run(c context.Context, cl criClient, s streams) error {
	pull, ctrCfg, podCfg, err := o.load(o.containerConfig, o.podConfig)
	if err != nil {
		return err
	}
	podID, err := runPodSandbox(c, cl, podCfg, o.handler, o.runTimeout)
	if err != nil {
		return err
	}
	left := func(err error) error {
		return fmt.Errorf("%w (pod sandbox %s is left running; remove it with crictl rmp -f %[2]s)", err, podID)
	}
	id, err := createContainer(c, cl, s, podID, ctrCfg, podCfg, pull, &o.pull, o.timeout)
	if err != nil {
		return left(err)
	}
	if err := startContainers(c, cl, []string{id}, s.out); err != nil {
		return left(err)
	}
	return nil
}

// startCommand starts created containers.
func (a *app) startCommand() *cobra.Command {
	return a.idsCommand("start", "CONTAINER-ID", "Start one or more created containers", func(c context.Context, cl criClient, args []string) error {
		return startContainers(c, cl, args, a.out)
	})
}

// startContainers starts the containers named by ID prefix, printing each ID.
func startContainers(c context.Context, cl criClient, prefixes []string, out io.Writer) error {
	return forEachID(c, cl.rt, resolveContainerIDs, prefixes, func(id string) error {
		if _, err := cl.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return fmt.Errorf("starting the container %q: %w", id, err)
		}
		fmt.Fprintln(out, id)
		return nil
	})
}

// stopOptions are the options of stop: the containers by ID prefix, or all running ones.
type stopOptions struct {
	prefixes []string
	// grace is the seconds the runtime waits before it kills a container.
	grace int64
	all   bool
	// callTimeout bounds each CRI call; a stop gets the grace period on top.
	callTimeout time.Duration
}

// stopCommand stops running containers, waiting --timeout seconds before the runtime kills them.
func (a *app) stopCommand() *cobra.Command {
	var o stopOptions
	cmd := &cobra.Command{
		Use:   "stop CONTAINER-ID [CONTAINER-ID...]",
		Short: "Stop one or more running containers",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes, o.callTimeout = args, a.cfg.Timeout
			return o.run(c, cl, a.out)
		}),
	}
	cmd.Flags().Int64VarP(&o.grace, "timeout", "t", 0, "seconds to wait to kill the container after a graceful stop is requested")
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "stop all running containers")
	return cmd
}

// run stops every selected container in turn, stopping at the first error.
func (o *stopOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if o.all == (len(o.prefixes) > 0) {
		return errors.New("stop: give CONTAINER-IDs or --all, not both")
	}
	if o.grace < 0 {
		return fmt.Errorf("--timeout %d: must be 0 or more seconds", o.grace)
	}
	stop := func(id string) error { return stopContainer(c, cl, id, o.grace, o.callTimeout, out) }
	if !o.all {
		return forEachID(c, cl.rt, resolveContainerIDs, o.prefixes, stop)
	}
	ctrs, err := listContainers(c, cl.rt, nil, &psFilter{listFlags: listFlags{state: "running"}})
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	if len(ctrs) == 0 {
		fmt.Fprintln(out, "No running containers found.")
		return nil
	}
	for _, id := range idsOf(ctrs) {
		if err := stop(id); err != nil {
			return err
		}
	}
	return nil
}

// stopContainer stops one container with grace seconds before the kill and prints its ID.
func stopContainer(c context.Context, cl criClient, id string, grace int64, callTimeout time.Duration, out io.Writer) error {
	// The call lasts up to the grace period; allow that on top of the call timeout.
	cc, cancel := context.WithTimeout(c, callTimeout+time.Duration(grace)*time.Second)
	defer cancel()
	if _, err := cl.rt.StopContainer(cc, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace}); err != nil {
		return fmt.Errorf("stopping the container %q: %w", id, err)
	}
	fmt.Fprintln(out, id)
	return nil
}

// rmOptions are the options of rm: the containers by ID prefix, or all of them.
type rmOptions struct {
	prefixes             []string
	force, all, keepLogs bool
	// callTimeout bounds each CRI call (the stop of a running container with --force).
	callTimeout time.Duration
}

// rmCommand removes containers (-a: all); a running one needs -f, which stops it first. The container's
// log file and its rotations are removed unless --keep-logs.
func (a *app) rmCommand() *cobra.Command {
	var o rmOptions
	cmd := &cobra.Command{
		Use:   "rm CONTAINER-ID [CONTAINER-ID...]",
		Short: "Remove one or more containers",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes, o.callTimeout = args, a.cfg.Timeout
			return o.run(c, cl, a.streams)
		}),
	}
	cmd.Flags().BoolVarP(&o.force, "force", "f", false, "force removal of the container, disregarding if running")
	cmd.Flags().BoolVarP(&o.keepLogs, "keep-logs", "k", false, "preserve the container log file and its rotations")
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "remove all containers")
	return cmd
}

// run removes every selected container, reporting all failures together.
func (o *rmOptions) run(c context.Context, cl criClient, s streams) error {
	if len(o.prefixes) == 0 && !o.all {
		return errors.New("rm: give CONTAINER-IDs or --all")
	}
	var ids []string
	if o.all {
		resp, err := cl.rt.ListContainers(c, &runtimeapi.ListContainersRequest{})
		if err != nil {
			return err
		}
		ids = idsOf(resp.GetContainers())
	} else {
		var err error
		if ids, err = resolveContainerIDs(c, cl.rt, o.prefixes); err != nil {
			return err
		}
	}
	return removeEach(s.errOut, ids, "No containers to remove", func(id string) error { return o.remove(c, cl, id, s) })
}

func (o *rmOptions) remove(c context.Context, cl criClient, id string, s streams) error {
	st, err := cl.rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return fmt.Errorf("getting container status %q: %w", id, err)
	}
	if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		if !o.force {
			return fmt.Errorf("container %q is running, please stop it first (or use --force)", id)
		}
		if err := stopContainer(c, cl, id, 0, o.callTimeout, s.out); err != nil {
			return err
		}
	}
	if _, err := cl.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("removing container %q: %w", id, err)
	}
	if lp := st.GetStatus().GetLogPath(); lp != "" && !o.keepLogs {
		rotated, _ := filepath.Glob(lp + ".*")
		for _, f := range append(rotated, lp) {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(s.errOut, "removing log file %s of container %s: %v\n", f, id, err)
			}
		}
	}
	fmt.Fprintln(s.out, id)
	return nil
}

// inspectOptions are the options of inspect: the containers by ID prefix, or else those the filters
// select.
type inspectOptions struct {
	psFilter
	statusFlags
	prefixes []string
}

// inspectCommand prints the ContainerStatus of containers named by ID prefix, or of those the filters
// select.
func (a *app) inspectCommand() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect [CONTAINER-ID...]",
		Short: "Display the status of one or more containers",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes = args
			return o.run(c, cl, a.out)
		}),
	}
	o.psFilter.add(cmd, "container")
	cmd.Flags().StringVarP(&o.pod, "pod", "p", "", "filter by pod ID (a prefix is enough)")
	cmd.Flags().StringVar(&o.image, "image", "", "filter by container image")
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "consider all containers, not only running ones")
	o.statusFlags.add(cmd, formatJSON, "json|yaml|go-template|table")
	return cmd
}

// run prints the status of each selected container.
func (o *inspectOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
		return err
	}
	ids, err := idsOrFilter(c, cl.rt, o.prefixes, resolveContainerIDs, "container", "containers",
		func() ([]*runtimeapi.Container, error) { return listContainers(c, cl.rt, cl.img, &o.psFilter) })
	if err != nil {
		return err
	}
	return printInspected(out, &o.statusFlags, ids, func(id string) (inspected, error) {
		r, err := cl.rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: !o.quiet})
		if err != nil {
			return inspected{}, fmt.Errorf("get container status of %s: %w", id, err)
		}
		s := r.GetStatus()
		return inspected{
			table: func(out io.Writer) { printContainerStatus(out, r, !o.quiet) },
			doc:   statusDoc{status: s, info: r.GetInfo(), times: containerTimes(s), allFields: true},
		}, nil
	})
}

// containerTimes are the times of inspect's document, as upstream renders them: createdAt always as
// a Unix time (an unset one is the epoch); startedAt once the container left CONTAINER_CREATED and
// finishedAt once it exited (or is unknown with a finish time), the zero time.Time before.
func containerTimes(s *runtimeapi.ContainerStatus) map[string]time.Time {
	ts := map[string]time.Time{"createdAt": time.Unix(0, s.GetCreatedAt()), "startedAt": {}, "finishedAt": {}}
	if s.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		ts["startedAt"] = time.Unix(0, s.GetStartedAt())
	}
	if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED ||
		(s.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN && s.GetFinishedAt() > 0) {
		ts["finishedAt"] = time.Unix(0, s.GetFinishedAt())
	}
	return ts
}

func printContainerStatus(out io.Writer, r *runtimeapi.ContainerStatusResponse, verbose bool) {
	s, now := r.GetStatus(), time.Now()
	fmt.Fprintf(out, "ID: %s\n", s.GetId())
	if md := s.GetMetadata(); md != nil {
		printIf(out, "Name", md.GetName())
		if md.GetAttempt() != 0 {
			fmt.Fprintf(out, "Attempt: %d\n", md.GetAttempt())
		}
	}
	fmt.Fprintf(out, "State: %s\n", s.GetState())
	fmt.Fprintf(out, "Created: %s\n", ago(s.GetCreatedAt(), now))
	if s.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		fmt.Fprintf(out, "Started: %s\n", ago(s.GetStartedAt(), now))
	}
	if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		if s.GetFinishedAt() > 0 {
			fmt.Fprintf(out, "Finished: %s\n", ago(s.GetFinishedAt(), now))
		}
		fmt.Fprintf(out, "Exit Code: %d\n", s.GetExitCode())
	}
	printMap(out, "Labels", s.GetLabels())
	printMap(out, "Annotations", s.GetAnnotations())
	if verbose {
		fmt.Fprintf(out, "Info: %v\n", r.GetInfo())
	}
}

// updateCommand updates the Linux resources of running containers (UpdateContainerResources).
func (a *app) updateCommand() *cobra.Command {
	var r runtimeapi.LinuxContainerResources
	cmd := a.idsCommand("update", "CONTAINER-ID", "Update one or more running containers", func(c context.Context, cl criClient, args []string) error {
		return updateContainers(c, cl, args, &r, a.out)
	})
	fl := cmd.Flags()
	fl.Int64Var(&r.CpuPeriod, "cpu-period", 0, "CPU CFS period to be used for hardcapping (in usecs); 0 for the system default")
	fl.Int64Var(&r.CpuQuota, "cpu-quota", 0, "CPU CFS hardcap limit (in usecs), allowed CPU time in a given period")
	fl.Int64Var(&r.CpuShares, "cpu-share", 0, "CPU shares (relative weight vs. other containers)")
	fl.Int64Var(&r.MemoryLimitInBytes, "memory", 0, "memory limit (in bytes)")
	fl.StringVar(&r.CpusetCpus, "cpuset-cpus", "", "CPU(s) to use")
	fl.StringVar(&r.CpusetMems, "cpuset-mems", "", "memory node(s) to use")
	fl.Int64Var(&r.OomScoreAdj, "oom-score-adj", 0, "OOM killer score to use")
	return cmd
}

// updateContainers sets resources r on the containers named by ID prefix, printing each ID.
func updateContainers(c context.Context, cl criClient, prefixes []string, r *runtimeapi.LinuxContainerResources, out io.Writer) error {
	return forEachID(c, cl.rt, resolveContainerIDs, prefixes, func(id string) error {
		if _, err := cl.rt.UpdateContainerResources(c, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: r}); err != nil {
			return fmt.Errorf("updating container resources for %q: %w", id, err)
		}
		fmt.Fprintln(out, id)
		return nil
	})
}

// checkpointOptions are the options of checkpoint.
type checkpointOptions struct {
	prefixes []string
	export   string
}

// checkpointCommand checkpoints running containers into a tar archive (CRI CheckpointContainer, which
// the runtime carries out with CRIU); a runtime without checkpoint support gets a clear error.
func (a *app) checkpointCommand() *cobra.Command {
	var o checkpointOptions
	cmd := &cobra.Command{
		Use:   "checkpoint --export /path/to/checkpoint.tar CONTAINER-ID [CONTAINER-ID...]",
		Short: "Checkpoint one or more running containers",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.prefixes = args
			return o.run(c, cl, a.out)
		}),
	}
	cmd.Flags().StringVarP(&o.export, "export", "e", "", "the tar archive (/path/to/checkpoint.tar) to export the checkpoint to; a relative path is taken from the working directory")
	return cmd
}

// run checkpoints each container named by ID prefix to o.export, printing each ID.
func (o *checkpointOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if len(o.prefixes) == 0 {
		return errors.New("checkpoint: give one or more CONTAINER-IDs")
	}
	if o.export == "" {
		return errors.New("checkpoint: cannot checkpoint a container without a destination; give --export=/path/to/checkpoint.tar")
	}
	// The runtime writes the archive: a relative path would be taken from its working directory.
	loc, err := filepath.Abs(o.export)
	if err != nil {
		return fmt.Errorf("--export %q: %w", o.export, err)
	}
	return forEachID(c, cl.rt, resolveContainerIDs, o.prefixes, func(id string) error {
		if _, err := cl.rt.CheckpointContainer(c, &runtimeapi.CheckpointContainerRequest{ContainerId: id, Location: loc}); err != nil {
			return fmt.Errorf("checkpointing the container %q: %w", id, unsupported("CheckpointContainer", "checkpointing containers", err))
		}
		fmt.Fprintln(out, id)
		return nil
	})
}
