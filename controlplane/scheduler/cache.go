package scheduler

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Default requests counted for scoring only, for containers that request nothing, so that "no requests"
// pods still spread (upstream: pkg/scheduler/util DefaultMilliCPURequest / DefaultMemoryRequest).
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// resources is a pod's or a node's resource amounts in scheduler units: CPU in millicores, memory and
// ephemeral storage in bytes, extended resources in their own integer units.
type resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Scalar           map[v1.ResourceName]int64
}

func resourcesFromList(rl v1.ResourceList) resources {
	var r resources
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.Memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case v1.ResourcePods:
			// The pod count is checked separately against len(pods).
		default:
			if q.Value() == 0 {
				continue
			}
			if r.Scalar == nil {
				r.Scalar = map[v1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

func (r *resources) add(o resources, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for name, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[name] += sign * v
	}
}

// podInfo is what the scheduler derives once from a pod: its requests, its scoring requests (with
// defaults for containers that request nothing), its host ports and its parsed inter-pod affinity
// terms (AffinityErr says why they did not parse; a pod whose terms do not parse is counted with none).
type podInfo struct {
	Pod         *v1.Pod
	Requests    resources
	NonZero     resources
	HostPorts   []podspec.HostPort
	Affinity    podAffinityTerms
	AffinityErr error
}

func newPodInfo(pod *v1.Pod) *podInfo {
	pi := &podInfo{Pod: pod}
	pi.Requests = resourcesFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	nonZero := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		NonMissingContainerRequests: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(defaultMemoryRequest, resource.BinarySI),
		},
	})
	pi.NonZero = resourcesFromList(nonZero)
	pi.HostPorts = podspec.HostPorts(pod)
	pi.Affinity, pi.AffinityErr = parsePodAffinityTerms(pod)
	return pi
}

// nodeInfo is a node with the pods bound (or assumed bound) to it, their summed requests, and the
// subset of them with inter-pod affinity or anti-affinity terms (so that the existing pods' terms are
// evaluated without visiting every pod).
type nodeInfo struct {
	Node         *v1.Node
	Pods         map[string]*podInfo // by namespace/name
	AffinityPods map[string]*podInfo // the Pods with inter-pod (anti-)affinity terms
	Requested    resources
	NonZero      resources
}

// clone returns a copy of n whose pods can be added and removed without changing n (the pods
// themselves are shared), for preemption's what-if simulations.
func (n *nodeInfo) clone() *nodeInfo {
	return &nodeInfo{Node: n.Node, Pods: maps.Clone(n.Pods), AffinityPods: maps.Clone(n.AffinityPods),
		Requested: n.Requested.clone(), NonZero: n.NonZero.clone()}
}

func (r resources) clone() resources {
	r.Scalar = maps.Clone(r.Scalar)
	return r
}

func newNodeInfo() *nodeInfo {
	return &nodeInfo{Pods: map[string]*podInfo{}, AffinityPods: map[string]*podInfo{}}
}

func (n *nodeInfo) addPod(key string, pi *podInfo) {
	n.Pods[key] = pi
	n.Requested.add(pi.Requests, 1)
	n.NonZero.add(pi.NonZero, 1)
	if pi.Affinity.hasAny() {
		n.AffinityPods[key] = pi
	}
}

func (n *nodeInfo) removePod(key string) {
	pi, ok := n.Pods[key]
	if !ok {
		return
	}
	delete(n.Pods, key)
	delete(n.AffinityPods, key)
	n.Requested.add(pi.Requests, -1)
	n.NonZero.add(pi.NonZero, -1)
}

// cache keeps a nodeInfo per node, fed by the node and pod informers, plus pods the scheduler has
// assumed onto a node while their binding is in flight (so the next pod sees the capacity as taken
// before the informer reports the binding).
type cache struct {
	mu      sync.Mutex
	nodes   map[string]*nodeInfo
	podNode map[string]string   // pod key → node it is counted on
	assumed map[string]struct{} // pod keys counted by assumption only
	// nominated are the unbound pods with status.nominatedNodeName (by pod key): preemption freed room
	// for them there, so pods of lower priority do not take it (upstream's nominator).
	nominated map[string]*podInfo
}

func newCache() *cache {
	return &cache{nodes: map[string]*nodeInfo{}, podNode: map[string]string{}, assumed: map[string]struct{}{},
		nominated: map[string]*podInfo{}}
}

func (c *cache) nodeLocked(name string) *nodeInfo {
	ni, ok := c.nodes[name]
	if !ok {
		ni = newNodeInfo()
		c.nodes[name] = ni
	}
	return ni
}

func (c *cache) setNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodeLocked(node.Name).Node = node
}

func (c *cache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[name]
	if !ok {
		return
	}
	if len(ni.Pods) == 0 {
		delete(c.nodes, name)
		return
	}
	// Pods still bound to a deleted node keep being counted until they are deleted too.
	ni.Node = nil
}

// occupiesNode reports whether a pod counts against its node's capacity: bound and not terminal.
func occupiesNode(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && !podspec.IsTerminal(pod.Status.Phase)
}

// setPod records the informer's view of a pod. A pod the informer shows bound replaces its assumption.
func (c *cache) setPod(key string, pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, isAssumed := c.assumed[key]; isAssumed && pod.Spec.NodeName == "" {
		return // binding still in flight: keep the assumption
	}
	c.removePodLocked(key)
	if occupiesNode(pod) {
		c.nodeLocked(pod.Spec.NodeName).addPod(key, newPodInfo(pod))
		c.podNode[key] = pod.Spec.NodeName
	}
	if pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "" && pod.DeletionTimestamp == nil && !podspec.IsTerminal(pod.Status.Phase) {
		c.nominated[key] = newPodInfo(pod)
	}
}

// nominate records that pod waits for room preemption made on nodeName, before the informer reports
// the status write.
func (c *cache) nominate(key string, pod *v1.Pod, nodeName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := pod.DeepCopy()
	p.Status.NominatedNodeName = nodeName
	c.nominated[key] = newPodInfo(p)
}

// nominatedByNodeLocked returns the nominated pods per node, leaving out the pod named except.
func (c *cache) nominatedByNodeLocked(except string) map[string][]*podInfo {
	out := map[string][]*podInfo{}
	for key, pi := range c.nominated {
		if key != except {
			out[pi.Pod.Status.NominatedNodeName] = append(out[pi.Pod.Status.NominatedNodeName], pi)
		}
	}
	return out
}

func (c *cache) removePod(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(key)
}

func (c *cache) removePodLocked(key string) {
	delete(c.assumed, key)
	delete(c.nominated, key)
	nodeName, ok := c.podNode[key]
	if !ok {
		return
	}
	delete(c.podNode, key)
	if ni, ok := c.nodes[nodeName]; ok {
		ni.removePod(key)
		if ni.Node == nil && len(ni.Pods) == 0 {
			delete(c.nodes, nodeName)
		}
	}
}

// assume counts pod on nodeName before its binding is confirmed.
func (c *cache) assume(key string, pod *v1.Pod, nodeName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(key)
	bound := pod.DeepCopy()
	bound.Spec.NodeName = nodeName
	c.nodeLocked(nodeName).addPod(key, newPodInfo(bound))
	c.podNode[key] = nodeName
	c.assumed[key] = struct{}{}
}

// forget drops an assumption whose binding failed.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.assumed[key]; ok {
		c.removePodLocked(key)
	}
}

func (c *cache) isAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.assumed[key]
	return ok
}
