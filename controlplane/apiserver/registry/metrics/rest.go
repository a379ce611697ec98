package metrics

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Store is what the REST storages read nodes and pods from: the node and pod storages (Get returns a
// *corev1.Node or *corev1.Pod, List a *corev1.NodeList or *corev1.PodList).
type Store interface {
	rest.Getter
	rest.Lister
}

// Storage returns the metrics.k8s.io/v1beta1 resources, "nodes" (NodeMetrics) and "pods" (PodMetrics),
// answering from s's points for the objects nodes and pods hold: list and get, label and field
// selectors (metadata.name, metadata.namespace) applied to the nodes and pods, as metrics-server does.
func Storage(s *Scraper, nodes, pods Store) map[string]rest.Storage {
	return map[string]rest.Storage{
		"nodes": &NodeREST{scraper: s, nodes: nodes, readOnly: readOnly{rest.NewDefaultTableConvertor(metricsv1beta1.Resource("nodes"))}},
		"pods":  &PodREST{scraper: s, pods: pods, readOnly: readOnly{rest.NewDefaultTableConvertor(metricsv1beta1.Resource("pods"))}},
	}
}

// readOnly is what both storages share: the default table (name, age), nothing to destroy, no
// singular name.
type readOnly struct{ rest.TableConvertor }

// Destroy implements rest.Storage.
func (readOnly) Destroy() {}

// GetSingularName implements rest.SingularNameProvider.
func (readOnly) GetSingularName() string { return "" }

// NodeREST serves NodeMetrics (cluster-scoped, read-only).
type NodeREST struct {
	readOnly
	scraper *Scraper
	nodes   Store
}

var (
	_ rest.Getter               = &NodeREST{}
	_ rest.Lister               = &NodeREST{}
	_ rest.Scoper               = &NodeREST{}
	_ rest.KindProvider         = &NodeREST{}
	_ rest.SingularNameProvider = &NodeREST{}
)

// New implements rest.Storage.
func (r *NodeREST) New() runtime.Object { return &metricsv1beta1.NodeMetrics{} }

// NewList implements rest.Lister.
func (r *NodeREST) NewList() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }

// Kind implements rest.KindProvider.
func (r *NodeREST) Kind() string { return "NodeMetrics" }

// NamespaceScoped implements rest.Scoper.
func (r *NodeREST) NamespaceScoped() bool { return false }

// List returns the metrics of the nodes options select that have them, sorted by name.
func (r *NodeREST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.nodes.List(ctx, selectors(options))
	if err != nil {
		return nil, err
	}
	nodes := obj.(*corev1.NodeList).Items
	out := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
	for i := range nodes {
		if m, ok := r.scraper.nodeMetrics(&nodes[i]); ok {
			out.Items = append(out.Items, m)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Name < out.Items[j].Name })
	return out, nil
}

// Get returns one node's metrics: the node's NotFound when there is no such node, NotFound of
// nodemetrics.metrics.k8s.io when it has no metrics (yet).
func (r *NodeREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.nodes.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m, ok := r.scraper.nodeMetrics(obj.(*corev1.Node))
	if !ok {
		return nil, apierrors.NewNotFound(metricsv1beta1.Resource("nodemetrics"), name)
	}
	return &m, nil
}

// PodREST serves PodMetrics (namespaced, read-only).
type PodREST struct {
	readOnly
	scraper *Scraper
	pods    Store
}

var (
	_ rest.Getter               = &PodREST{}
	_ rest.Lister               = &PodREST{}
	_ rest.Scoper               = &PodREST{}
	_ rest.KindProvider         = &PodREST{}
	_ rest.SingularNameProvider = &PodREST{}
)

// New implements rest.Storage.
func (r *PodREST) New() runtime.Object { return &metricsv1beta1.PodMetrics{} }

// NewList implements rest.Lister.
func (r *PodREST) NewList() runtime.Object { return &metricsv1beta1.PodMetricsList{} }

// Kind implements rest.KindProvider.
func (r *PodREST) Kind() string { return "PodMetrics" }

// NamespaceScoped implements rest.Scoper.
func (r *PodREST) NamespaceScoped() bool { return true }

// List returns the metrics of the pods of the request's namespace (all namespaces when none) that
// options select and that have them, sorted by namespace and name.
func (r *PodREST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.pods.List(ctx, selectors(options))
	if err != nil {
		return nil, err
	}
	pods := obj.(*corev1.PodList).Items
	out := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
	for i := range pods {
		if m, ok := r.scraper.podMetrics(&pods[i]); ok {
			out.Items = append(out.Items, m)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool {
		if a, b := out.Items[i], out.Items[j]; a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return out.Items[i].Name < out.Items[j].Name
	})
	return out, nil
}

// Get returns one pod's metrics: the pod's NotFound when there is no such pod, NotFound of
// podmetrics.metrics.k8s.io when it has no metrics (yet).
func (r *PodREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m, ok := r.scraper.podMetrics(obj.(*corev1.Pod))
	if !ok {
		ns, _ := genericapirequest.NamespaceFrom(ctx)
		return nil, apierrors.NewNotFound(metricsv1beta1.Resource("podmetrics"), ns+"/"+name)
	}
	return &m, nil
}

// selectors are the list options passed on to the node or pod storage: the label and field selectors
// only (read from the watch cache, resourceVersion "0"; the metrics are no object versions).
func selectors(o *metainternalversion.ListOptions) *metainternalversion.ListOptions {
	out := &metainternalversion.ListOptions{ResourceVersion: "0"}
	if o != nil {
		out.LabelSelector, out.FieldSelector = o.LabelSelector, o.FieldSelector
	}
	return out
}

// nodeMetrics is a node's NodeMetrics from the stored points; false when it has none.
func (s *Scraper) nodeMetrics(n *corev1.Node) (metricsv1beta1.NodeMetrics, bool) {
	s.mu.RLock()
	u, ok, err := s.points.node(n.Name)
	s.mu.RUnlock()
	if err != nil {
		s.log.Warn("metrics: node usage left out", "node", n.Name, "err", err)
	}
	if !ok {
		return metricsv1beta1.NodeMetrics{}, false
	}
	return metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
		Timestamp:  metav1.NewTime(u.at), Window: metav1.Duration{Duration: u.window}, Usage: u.resources,
	}, true
}

// podMetrics is a pod's PodMetrics (its containers sorted by name) from the stored points; false when
// some container has none.
func (s *Scraper) podMetrics(p *corev1.Pod) (metricsv1beta1.PodMetrics, bool) {
	s.mu.RLock()
	cs, earliest, ok, err := s.points.pod(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	s.mu.RUnlock()
	if err != nil {
		s.log.Warn("metrics: pod usage left out", "pod", fmt.Sprintf("%s/%s", p.Namespace, p.Name), "err", err)
	}
	if !ok {
		return metricsv1beta1.PodMetrics{}, false
	}
	m := metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
		Timestamp:  metav1.NewTime(earliest.at), Window: metav1.Duration{Duration: earliest.window},
		Containers: make([]metricsv1beta1.ContainerMetrics, 0, len(cs)),
	}
	for name, u := range cs {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: name, Usage: u.resources})
	}
	sort.Slice(m.Containers, func(i, j int) bool { return m.Containers[i].Name < m.Containers[j].Name })
	return m, true
}
