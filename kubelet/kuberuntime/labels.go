package kuberuntime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// CRI labels and annotations the kubelet puts on sandboxes and containers; they are how a restarted
// kubelet recognises (adopts) what it created. The names are upstream's.
const (
	annotationContainerHash        = "io.kubernetes.container.hash"
	annotationRestartCount         = "io.kubernetes.container.restartCount"
	annotationTerminationGrace     = "io.kubernetes.pod.terminationGracePeriod"
	annotationTerminationMessage   = "io.kubernetes.container.terminationMessagePath"
	annotationTerminationMsgPolicy = "io.kubernetes.container.terminationMessagePolicy"
	annotationContainerPorts       = "io.kubernetes.container.ports"
)

// sandboxLabels are the pod's labels plus the pod name, namespace and UID labels.
func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[kubelettypes.KubernetesPodNameLabel] = pod.Name
	l[kubelettypes.KubernetesPodNamespaceLabel] = pod.Namespace
	l[kubelettypes.KubernetesPodUIDLabel] = string(pod.UID)
	return l
}

// sandboxAnnotations are the pod's annotations.
func sandboxAnnotations(pod *v1.Pod) map[string]string {
	a := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		a[k] = v
	}
	return a
}

// containerLabels identify the container's pod and its name in the pod spec.
func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		kubelettypes.KubernetesPodNameLabel:       pod.Name,
		kubelettypes.KubernetesPodNamespaceLabel:  pod.Namespace,
		kubelettypes.KubernetesPodUIDLabel:        string(pod.UID),
		kubelettypes.KubernetesContainerNameLabel: c.Name,
	}
}

// containerAnnotations carry the spec hash and restart count the kubelet needs after a restart.
func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		annotationContainerHash:        containerHash(c),
		annotationRestartCount:         strconv.Itoa(restartCount),
		annotationTerminationMessage:   c.TerminationMessagePath,
		annotationTerminationMsgPolicy: string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[annotationTerminationGrace] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[annotationTerminationGrace] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[annotationContainerPorts] = string(b)
		}
	}
	return a
}

// containerHash is a stable hash of the container spec without its resources (which may change in
// place); a running container whose hash differs from its spec's is restarted.
func containerHash(c *v1.Container) string {
	cc := c.DeepCopy()
	cc.Resources = v1.ResourceRequirements{}
	cc.ResizePolicy = nil
	b, err := json.Marshal(cc)
	if err != nil {
		panic(fmt.Sprintf("marshal container spec: %v", err))
	}
	h := fnv.New32a()
	h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}
