package node

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Kind is the kind of object a node may reach through the pods bound to it.
type Kind string

// The kinds of the graph's vertices besides pods and nodes (upstream's vertex types, narrowed to what
// nodekit serves).
const (
	Secret                Kind = "secrets"
	ConfigMap             Kind = "configmaps"
	ServiceAccount        Kind = "serviceaccounts"
	PersistentVolumeClaim Kind = "persistentvolumeclaims"
	// PersistentVolume is reached through a claim a pod uses that is bound to it (claim → volume edge).
	PersistentVolume Kind = "persistentvolumes"
)

// Ref is an object a pod refers to.
type Ref struct {
	Kind            Kind
	Namespace, Name string
}

type podVertex struct {
	node string
	uid  types.UID
	refs []Ref
}

// Graph records, for every node, the objects the pods bound to it refer to: upstream's Node authorizer
// graph (pod → secret, configmap, service account, PVC; pod → node), held as reference counts per node
// so that a lookup is one map access. It is safe for concurrent use; the Populator feeds it from a pod
// informer.
type Graph struct {
	mu     sync.RWMutex
	pods   map[types.NamespacedName]podVertex
	byNode map[string]map[Ref]int
	// volumes maps a claim to the volume it is bound to (spec.volumeName)
	volumes map[types.NamespacedName]string
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{pods: map[types.NamespacedName]podVertex{}, byNode: map[string]map[Ref]int{},
		volumes: map[types.NamespacedName]string{}}
}

// SetClaim records the claim namespace/name bound to volume (spec.volumeName; "" forgets the edge).
func (g *Graph) SetClaim(namespace, name, volume string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	g.mu.Lock()
	defer g.mu.Unlock()
	if volume == "" {
		delete(g.volumes, key)
		return
	}
	g.volumes[key] = volume
}

// AddPod records pod (replacing what was recorded under its namespace/name). A pod not bound to a node
// (spec.nodeName empty) gives no node any access and is only forgotten.
func (g *Graph) AddPod(pod *corev1.Pod) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleteLocked(key)
	if pod.Spec.NodeName == "" {
		return
	}
	v := podVertex{node: pod.Spec.NodeName, uid: pod.UID, refs: PodRefs(pod)}
	g.pods[key] = v
	counts := g.byNode[v.node]
	if counts == nil {
		counts = map[Ref]int{}
		g.byNode[v.node] = counts
	}
	for _, r := range v.refs {
		counts[r]++
	}
}

// DeletePod forgets the pod namespace/name.
func (g *Graph) DeletePod(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleteLocked(types.NamespacedName{Namespace: namespace, Name: name})
}

func (g *Graph) deleteLocked(key types.NamespacedName) {
	v, ok := g.pods[key]
	if !ok {
		return
	}
	delete(g.pods, key)
	counts := g.byNode[v.node]
	for _, r := range v.refs {
		if counts[r]--; counts[r] <= 0 {
			delete(counts, r)
		}
	}
	if len(counts) == 0 {
		delete(g.byNode, v.node)
	}
}

// PodOnNode reports whether the pod namespace/name is bound to node.
func (g *Graph) PodOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	v, ok := g.pods[types.NamespacedName{Namespace: namespace, Name: name}]
	return ok && v.node == node
}

// Reaches reports whether a pod bound to node refers to the object kind namespace/name.
// A PersistentVolume (cluster-scoped: namespace "") is reached when a claim a pod on node uses is
// bound to it.
func (g *Graph) Reaches(node string, kind Kind, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if kind == PersistentVolume {
		for r, n := range g.byNode[node] {
			if n > 0 && r.Kind == PersistentVolumeClaim && g.volumes[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}] == name {
				return true
			}
		}
		return false
	}
	return g.byNode[node][Ref{kind, namespace, name}] > 0
}

// PodRefs lists the objects pod refers to, each once: its service account ("default" when it names
// none, except for mirror pods), image pull secrets, the
// secrets, configmaps and PVCs of its volumes (projected sources and ephemeral volumes' claims
// <pod>-<volume> included) and of its containers' env and envFrom (init and ephemeral containers
// included), as upstream's graph populator does.
func PodRefs(pod *corev1.Pod) []Ref {
	seen := map[Ref]bool{}
	var out []Ref
	add := func(kind Kind, name string) {
		r := Ref{kind, pod.Namespace, name}
		if name != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sa := pod.Spec.ServiceAccountName
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; sa == "" && !mirror {
		sa = "default" // what the kubelet requests tokens for when the pod names none
	}
	add(ServiceAccount, sa)
	podspec.VisitSecretNames(pod, func(name string) { add(Secret, name) })
	podspec.VisitConfigMapNames(pod, func(name string) { add(ConfigMap, name) })
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			add(PersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add(PersistentVolumeClaim, pod.Name+"-"+v.Name)
		}
	}
	return out
}
