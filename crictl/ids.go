package crictl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fullIDLen is the length of the hex IDs containerd gives sandboxes and containers; an argument of this
// length is used as is.
const fullIDLen = 64

// candidate is something an ID prefix may name.
type candidate struct {
	id, desc string
}

// matchPrefix resolves prefix among candidates: exactly one match returns its ID; none is an error
// "no KIND with ID prefix P"; several is an error listing every match with its description.
func matchPrefix(kind, prefix string, all []candidate) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%s ID cannot be empty", kind)
	}
	var hits []candidate
	for _, c := range all {
		if c.id == prefix {
			return c.id, nil
		}
		if strings.HasPrefix(c.id, prefix) {
			hits = append(hits, c)
		}
	}
	switch len(hits) {
	case 0:
		return "", fmt.Errorf("no %s with ID prefix %q", kind, prefix)
	case 1:
		return hits[0].id, nil
	}
	lines := make([]string, len(hits))
	for i, h := range hits {
		lines[i] = "  " + h.id + "  " + h.desc
	}
	return "", fmt.Errorf("ID prefix %q is ambiguous, it matches %d %ss:\n%s", prefix, len(hits), kind, strings.Join(lines, "\n"))
}

// resolvePodIDs turns pod sandbox ID prefixes into full IDs with one ListPodSandbox call.
func resolvePodIDs(ctx context.Context, rt runtimeapi.RuntimeServiceClient, prefixes []string) ([]string, error) {
	if allFull(prefixes) {
		return prefixes, nil
	}
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	cands := make([]candidate, 0, len(resp.GetItems()))
	for _, p := range resp.GetItems() {
		md := p.GetMetadata()
		cands = append(cands, candidate{p.GetId(), fmt.Sprintf("%s/%s (%s)", md.GetNamespace(), md.GetName(), podState(p.GetState()))})
	}
	return resolveAll("pod sandbox", prefixes, cands)
}

// resolveContainerIDs turns container ID prefixes into full IDs with one ListContainers call.
func resolveContainerIDs(ctx context.Context, rt runtimeapi.RuntimeServiceClient, prefixes []string) ([]string, error) {
	if allFull(prefixes) {
		return prefixes, nil
	}
	resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, err
	}
	cands := make([]candidate, 0, len(resp.GetContainers()))
	for _, c := range resp.GetContainers() {
		cands = append(cands, candidate{c.GetId(), fmt.Sprintf("%s (%s, pod %s)", c.GetMetadata().GetName(),
			containerState(c.GetState()), truncateID(c.GetPodSandboxId(), ""))})
	}
	return resolveAll("container", prefixes, cands)
}

// resolveContainerID resolves one container ID prefix.
func resolveContainerID(ctx context.Context, rt runtimeapi.RuntimeServiceClient, prefix string) (string, error) {
	ids, err := resolveContainerIDs(ctx, rt, []string{prefix})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// resolvePodID resolves one pod sandbox ID prefix.
func resolvePodID(ctx context.Context, rt runtimeapi.RuntimeServiceClient, prefix string) (string, error) {
	ids, err := resolvePodIDs(ctx, rt, []string{prefix})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

func resolveAll(kind string, prefixes []string, cands []candidate) ([]string, error) {
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		id, err := matchPrefix(kind, p, cands)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

func allFull(ids []string) bool {
	for _, id := range ids {
		if len(id) != fullIDLen {
			return false
		}
	}
	return true
}

// podState renders a sandbox state as crictl's STATE column does.
func podState(s runtimeapi.PodSandboxState) string {
	switch s {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return "Ready"
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return "NotReady"
	}
	return s.String()
}

// containerState renders a container state as crictl's STATE column does.
func containerState(s runtimeapi.ContainerState) string {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return "Created"
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return "Running"
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return "Exited"
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return "Unknown"
	}
	return s.String()
}

// resolver turns ID prefixes into full IDs: resolvePodIDs or resolveContainerIDs.
type resolver func(context.Context, runtimeapi.RuntimeServiceClient, []string) ([]string, error)

// idsOf returns the IDs of listed sandboxes or containers, in their order.
func idsOf[T interface{ GetId() string }](items []T) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.GetId()
	}
	return ids
}

// idsOrFilter resolves the ID prefixes args, or when none are given, returns the IDs of the objects list
// selects (inspect, inspectp). kind ("pod", "container") and plural ("pod sandboxes", "containers") name
// them in errors; selecting nothing is an error.
func idsOrFilter[T interface{ GetId() string }](c context.Context, rt runtimeapi.RuntimeServiceClient, args []string, resolve resolver, kind, plural string, list func() ([]T, error)) ([]string, error) {
	if len(args) > 0 {
		return resolve(c, rt, args)
	}
	items, err := list()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", plural, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no %s IDs given and no %s matches the filters", kind, kind)
	}
	return idsOf(items), nil
}

// idsCommand builds a command "use ARG [ARG...]" that runs the verb run on its ID arguments (start,
// update, stopp).
func (a *app) idsCommand(use, arg, short string, run verbFunc) *cobra.Command {
	return &cobra.Command{
		Use:   use + " " + arg + " [" + arg + "...]",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE:  a.runE(run),
	}
}

// forEachID resolves the ID prefixes and applies do to each ID in turn, stopping at the first error.
func forEachID(c context.Context, rt runtimeapi.RuntimeServiceClient, resolve resolver, prefixes []string, do func(id string) error) error {
	ids, err := resolve(c, rt, prefixes)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := do(id); err != nil {
			return err
		}
	}
	return nil
}

// removeEach applies remove to every ID and joins the errors (rm, rmp, rmi); with no IDs it prints none
// on errOut.
func removeEach(errOut io.Writer, ids []string, none string, remove func(id string) error) error {
	if len(ids) == 0 {
		fmt.Fprintln(errOut, none)
		return nil
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, remove(id))
	}
	return errors.Join(errs...)
}

// optionalArg is the argument of a command that takes at most one, or "".
func optionalArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
