package crictl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// psCommand lists containers: table columns CONTAINER, IMAGE, CREATED, STATE, NAME, ATTEMPT, POD ID,
// POD, NAMESPACE; or -q IDs, -v details, -o json|yaml (a ListContainersResponse).
func (a *app) psCommand() *cobra.Command {
	var (
		f                                     psFilter
		verbose, quiet, noTrunc, resolveImage bool
		output                                string
	)
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List containers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			img, err := a.img()
			if err != nil {
				return err
			}
			ctrs, err := listContainers(ctx(cmd), rt, img, &f)
			if err != nil {
				return fmt.Errorf("listing containers: %w", err)
			}
			if output != formatTable {
				return printProto(a.out, &runtimeapi.ListContainersResponse{Containers: ctrs}, output)
			}
			return a.printContainers(ctx(cmd), img, ctrs, verbose, quiet, noTrunc, resolveImage)
		},
	}
	f.add(cmd, "container")
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "filter by container ID")
	fl.StringVarP(&f.pod, "pod", "p", "", "filter by pod ID (a prefix is enough)")
	fl.StringVar(&f.image, "image", "", "filter by container image")
	fl.BoolVarP(&f.all, "all", "a", false, "show all containers, not only running ones")
	fl.BoolVarP(&verbose, "verbose", "v", false, "show verbose information for containers")
	fl.BoolVarP(&quiet, "quiet", "q", false, "only display container IDs")
	fl.StringVarP(&output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	fl.BoolVar(&noTrunc, "no-trunc", false, "show output without truncating the ID")
	fl.BoolVarP(&resolveImage, "resolve-image-path", "r", false, "show the image's first repo tag instead of its ID")
	return cmd
}

func (a *app) printContainers(c context.Context, img runtimeapi.ImageServiceClient, ctrs []*runtimeapi.Container, verbose, quiet, noTrunc, resolveImage bool) error {
	now := time.Now()
	if quiet {
		for _, ctr := range ctrs {
			fmt.Fprintln(a.out, ctr.GetId())
		}
		return nil
	}
	if verbose {
		for _, ctr := range ctrs {
			fmt.Fprintf(a.out, "ID: %s\nPodID: %s\nNamespace: %s\n", ctr.GetId(), ctr.GetPodSandboxId(), labelOrUnknown(ctr.GetLabels(), labelPodNamespace))
			if md := ctr.GetMetadata(); md != nil {
				printIf(a, "Name", md.GetName())
				fmt.Fprintf(a.out, "Attempt: %d\n", md.GetAttempt())
			}
			fmt.Fprintf(a.out, "State: %s\n", containerState(ctr.GetState()))
			fmt.Fprintf(a.out, "Image: %s\n", ctr.GetImage().GetImage())
			fmt.Fprintf(a.out, "Created: %s\n", ago(ctr.GetCreatedAt(), now))
			printMap(a, "Labels", ctr.GetLabels())
			printMap(a, "Annotations", ctr.GetAnnotations())
			fmt.Fprintln(a.out)
		}
		return nil
	}
	t := newTable(a.out)
	t.row(colContainer, colImage, colCreated, colState, colName, colAttempt, colPodID, colPod, colNamespace)
	for _, ctr := range ctrs {
		id, podID, image := ctr.GetId(), ctr.GetPodSandboxId(), ctr.GetImage().GetImage()
		if !noTrunc {
			id, podID, image = truncateID(id, ""), truncateID(podID, ""), shortImage(image)
		}
		if resolveImage {
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

// createCommand creates a container in a pod from a ContainerConfig and the pod's PodSandboxConfig and
// prints its ID. With --with-pull (or pull-image-on-create in the config file) the image is pulled first.
func (a *app) createCommand() *cobra.Command {
	var (
		noPull, withPull bool
		pf               pullFlags
		cancelTimeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create POD container-config.[json|yaml] pod-config.[json|yaml]",
		Short: "Create a new container",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if noPull && withPull {
				return errors.New("conflict: --no-pull and --with-pull are both set")
			}
			ctrCfg, err := loadContainerConfig(args[1])
			if err != nil {
				return err
			}
			podCfg, err := loadPodSandboxConfig(args[2])
			if err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			podID, err := resolvePodID(c, rt, args[0])
			if err != nil {
				return err
			}
			if withPull || (a.cfg.PullImageOnCreate && !noPull) {
				img, err := a.img()
				if err != nil {
					return err
				}
				if _, err := a.pullImage(c, img, ctrCfg.GetImage().GetImage(), &pf, podCfg); err != nil {
					return err
				}
			}
			cc, cancel := context.WithTimeout(c, cmp.Or(cancelTimeout, a.cfg.Timeout))
			defer cancel()
			r, err := rt.CreateContainer(cc, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: ctrCfg, SandboxConfig: podCfg})
			if err != nil {
				return fmt.Errorf("creating container: %w", err)
			}
			fmt.Fprintln(a.out, r.GetContainerId())
			return nil
		},
	}
	cmd.Flags().BoolVar(&noPull, "no-pull", false, "do not pull the image (overrides pull-image-on-create=true in the config file)")
	cmd.Flags().BoolVar(&withPull, "with-pull", false, "pull the image before creating the container")
	cmd.Flags().DurationVarP(&cancelTimeout, "cancel-timeout", "T", 0, "time to wait for the request to complete before cancelling it")
	pf.add(cmd)
	return cmd
}

// startCommand starts created containers.
func (a *app) startCommand() *cobra.Command {
	return a.idsCommand("start", "CONTAINER-ID", "Start one or more created containers", resolveContainerIDs, func(c context.Context, rt runtimeapi.RuntimeServiceClient, id string) error {
		if _, err := rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return fmt.Errorf("starting the container %q: %w", id, err)
		}
		fmt.Fprintln(a.out, id)
		return nil
	})
}

// stopCommand stops running containers, waiting --timeout seconds before the runtime kills them.
func (a *app) stopCommand() *cobra.Command {
	var (
		grace int64
		all   bool
	)
	cmd := &cobra.Command{
		Use:   "stop CONTAINER-ID [CONTAINER-ID...]",
		Short: "Stop one or more running containers",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errors.New("stop: give CONTAINER-IDs or --all, not both")
			}
			if grace < 0 {
				return fmt.Errorf("--timeout %d: must be 0 or more seconds", grace)
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			var ids []string
			if all {
				ctrs, err := listContainers(c, rt, nil, &psFilter{listFlags: listFlags{state: "running"}})
				if err != nil {
					return fmt.Errorf("listing containers: %w", err)
				}
				if len(ctrs) == 0 {
					fmt.Fprintln(a.out, "No running containers found.")
					return nil
				}
				ids = idsOf(ctrs)
			} else if ids, err = resolveContainerIDs(c, rt, args); err != nil {
				return err
			}
			for _, id := range ids {
				if err := a.stopContainer(c, rt, id, grace); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().Int64VarP(&grace, "timeout", "t", 0, "seconds to wait to kill the container after a graceful stop is requested")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "stop all running containers")
	return cmd
}

func (a *app) stopContainer(c context.Context, rt runtimeapi.RuntimeServiceClient, id string, grace int64) error {
	// The call lasts up to the grace period; allow that on top of the call timeout.
	cc, cancel := context.WithTimeout(c, a.cfg.Timeout+time.Duration(grace)*time.Second)
	defer cancel()
	if _, err := rt.StopContainer(cc, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace}); err != nil {
		return fmt.Errorf("stopping the container %q: %w", id, err)
	}
	fmt.Fprintln(a.out, id)
	return nil
}

// rmCommand removes containers (-a: all); a running one needs -f, which stops it first. The container's
// log file and its rotations are removed unless --keep-logs.
func (a *app) rmCommand() *cobra.Command {
	var force, all, keepLogs bool
	cmd := &cobra.Command{
		Use:   "rm CONTAINER-ID [CONTAINER-ID...]",
		Short: "Remove one or more containers",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !all {
				return errors.New("rm: give CONTAINER-IDs or --all")
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			var ids []string
			if all {
				resp, err := rt.ListContainers(c, &runtimeapi.ListContainersRequest{})
				if err != nil {
					return err
				}
				ids = idsOf(resp.GetContainers())
			} else if ids, err = resolveContainerIDs(c, rt, args); err != nil {
				return err
			}
			return a.removeEach(ids, "No containers to remove", func(id string) error {
				return a.removeContainer(c, rt, id, force, keepLogs)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "force removal of the container, disregarding if running")
	cmd.Flags().BoolVarP(&keepLogs, "keep-logs", "k", false, "preserve the container log file and its rotations")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "remove all containers")
	return cmd
}

func (a *app) removeContainer(c context.Context, rt runtimeapi.RuntimeServiceClient, id string, force, keepLogs bool) error {
	st, err := rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return fmt.Errorf("getting container status %q: %w", id, err)
	}
	if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		if !force {
			return fmt.Errorf("container %q is running, please stop it first (or use --force)", id)
		}
		if err := a.stopContainer(c, rt, id, 0); err != nil {
			return err
		}
	}
	if _, err := rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("removing container %q: %w", id, err)
	}
	if lp := st.GetStatus().GetLogPath(); lp != "" && !keepLogs {
		rotated, _ := filepath.Glob(lp + ".*")
		for _, f := range append(rotated, lp) {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(a.errOut, "removing log file %s of container %s: %v\n", f, id, err)
			}
		}
	}
	fmt.Fprintln(a.out, id)
	return nil
}

// inspectCommand prints the ContainerStatus of containers named by ID prefix, or of those the filters
// select.
func (a *app) inspectCommand() *cobra.Command {
	var (
		f  psFilter
		sf statusFlags
	)
	cmd := &cobra.Command{
		Use:   "inspect [CONTAINER-ID...]",
		Short: "Display the status of one or more containers",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(sf.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
				return err
			}
			rt, err := a.rt()
			if err != nil {
				return err
			}
			img, err := a.img()
			if err != nil {
				return err
			}
			c := ctx(cmd)
			ids, err := idsOrFilter(c, rt, args, resolveContainerIDs, "container", "containers",
				func() ([]*runtimeapi.Container, error) { return listContainers(c, rt, img, &f) })
			if err != nil {
				return err
			}
			var docs []statusDoc
			for _, id := range ids {
				r, err := rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: !sf.quiet})
				if err != nil {
					return fmt.Errorf("get container status of %s: %w", id, err)
				}
				if sf.output == formatTable {
					a.printContainerStatus(r, !sf.quiet)
					continue
				}
				s := r.GetStatus()
				ts := map[string]int64{"createdAt": s.GetCreatedAt(), "startedAt": 0, "finishedAt": 0}
				if s.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
					ts["startedAt"] = s.GetStartedAt()
				}
				if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED || s.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
					ts["finishedAt"] = s.GetFinishedAt()
				}
				docs = append(docs, statusDoc{status: s, info: r.GetInfo(), times: ts, allFields: true})
			}
			return printStatus(a.out, docs, sf.output, sf.template)
		},
	}
	f.add(cmd, "container")
	cmd.Flags().StringVarP(&f.pod, "pod", "p", "", "filter by pod ID (a prefix is enough)")
	cmd.Flags().StringVar(&f.image, "image", "", "filter by container image")
	cmd.Flags().BoolVarP(&f.all, "all", "a", false, "consider all containers, not only running ones")
	sf.add(cmd, formatJSON, "json|yaml|go-template|table")
	return cmd
}

func (a *app) printContainerStatus(r *runtimeapi.ContainerStatusResponse, verbose bool) {
	s, now := r.GetStatus(), time.Now()
	fmt.Fprintf(a.out, "ID: %s\n", s.GetId())
	if md := s.GetMetadata(); md != nil {
		printIf(a, "Name", md.GetName())
		if md.GetAttempt() != 0 {
			fmt.Fprintf(a.out, "Attempt: %d\n", md.GetAttempt())
		}
	}
	fmt.Fprintf(a.out, "State: %s\n", s.GetState())
	fmt.Fprintf(a.out, "Created: %s\n", ago(s.GetCreatedAt(), now))
	if s.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		fmt.Fprintf(a.out, "Started: %s\n", ago(s.GetStartedAt(), now))
	}
	if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		if s.GetFinishedAt() > 0 {
			fmt.Fprintf(a.out, "Finished: %s\n", ago(s.GetFinishedAt(), now))
		}
		fmt.Fprintf(a.out, "Exit Code: %d\n", s.GetExitCode())
	}
	printMap(a, "Labels", s.GetLabels())
	printMap(a, "Annotations", s.GetAnnotations())
	if verbose {
		fmt.Fprintf(a.out, "Info: %v\n", r.GetInfo())
	}
}

// updateCommand updates the Linux resources of running containers (UpdateContainerResources).
func (a *app) updateCommand() *cobra.Command {
	var r runtimeapi.LinuxContainerResources
	cmd := a.idsCommand("update", "CONTAINER-ID", "Update one or more running containers", resolveContainerIDs, func(c context.Context, rt runtimeapi.RuntimeServiceClient, id string) error {
		if _, err := rt.UpdateContainerResources(c, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &r}); err != nil {
			return fmt.Errorf("updating container resources for %q: %w", id, err)
		}
		fmt.Fprintln(a.out, id)
		return nil
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
