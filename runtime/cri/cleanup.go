package cri

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveAll stops and removes every container and then every pod sandbox the runtime holds (CRI
// StopContainer with a zero grace period, RemoveContainer, StopPodSandbox, RemovePodSandbox; removing a
// sandbox tears down its network namespace through CNI). It is destructive by design: for the owner of
// a runtime that nodekit manages, or a test runtime, before it stops the runtime. It continues past
// failures and returns how many sandboxes and containers it removed plus all errors joined, each naming
// the object.
func (c *Client) RemoveAll(ctx context.Context) (pods, containers int, err error) {
	var errs []error
	ctrs, lerr := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if lerr != nil {
		return 0, 0, fmt.Errorf("list containers: %w", lerr)
	}
	for _, ctr := range ctrs.GetContainers() {
		id := ctr.GetId()
		if ctr.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			if _, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
				errs = append(errs, fmt.Errorf("stop container %s: %w", id, err))
			}
		}
		if _, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", id, err))
			continue
		}
		containers++
	}
	sbs, lerr := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if lerr != nil {
		return pods, containers, errors.Join(append(errs, fmt.Errorf("list pod sandboxes: %w", lerr))...)
	}
	for _, sb := range sbs.GetItems() {
		id := sb.GetId()
		if _, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s (%s/%s): %w", id, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), err))
		}
		if _, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s (%s/%s): %w", id, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), err))
			continue
		}
		pods++
	}
	return pods, containers, errors.Join(errs...)
}
