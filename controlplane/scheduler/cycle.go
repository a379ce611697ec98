package scheduler

import (
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// lookups are the objects other than nodes and pods that the filters and scores read.
type lookups interface {
	// namespaceLabels returns the labels of namespace ns (nil when it is not known).
	namespaceLabels(ns string) labels.Set
	// namespacesMatching returns the names of the namespaces sel selects.
	namespacesMatching(sel labels.Selector) []string
	// defaultSpreadSelector returns the selector the system default spread constraints use for pod:
	// the merged selectors of the Services, ReplicationController, ReplicaSet and StatefulSet that
	// select it (empty when none does).
	defaultSpreadSelector(pod *v1.Pod) labels.Selector
}

// cycleContext is what one scheduling cycle's filters and scores share: the pod, every node of the
// cache that has a Node object (read under the cache lock, so the cycle sees one consistent state),
// and the lookups.
type cycleContext struct {
	pod     *podInfo
	nodes   []*nodeInfo
	lookups lookups
	logger  logr.Logger

	nsLabels     labels.Set
	nsLabelsRead bool
}

// namespaceLabels returns the labels of the pod's namespace, read once per cycle.
func (cc *cycleContext) namespaceLabels() labels.Set {
	if !cc.nsLabelsRead {
		cc.nsLabels, cc.nsLabelsRead = cc.lookups.namespaceLabels(cc.pod.Pod.Namespace), true
	}
	return cc.nsLabels
}

// listerLookups answers lookups from the scheduler's informers.
type listerLookups struct {
	namespaces   corelisters.NamespaceLister
	services     corelisters.ServiceLister
	rcs          corelisters.ReplicationControllerLister
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
}

func (l *listerLookups) namespaceLabels(ns string) labels.Set {
	n, err := l.namespaces.Get(ns)
	if err != nil {
		return nil
	}
	return labels.Merge(n.Labels, nil)
}

func (l *listerLookups) namespacesMatching(sel labels.Selector) []string {
	list, err := l.namespaces.List(sel)
	if err != nil {
		return nil
	}
	names := make([]string, len(list))
	for i, n := range list {
		names[i] = n.Name
	}
	return names
}

var (
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	ssKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// defaultSpreadSelector follows upstream's DefaultSelector: the selectors of the Services in the
// pod's namespace that select it, merged, plus the selector of its controller when that is a
// ReplicationController, ReplicaSet or StatefulSet.
func (l *listerLookups) defaultSpreadSelector(pod *v1.Pod) labels.Selector {
	set := labels.Set{}
	if svcs, err := l.services.Services(pod.Namespace).List(labels.Everything()); err == nil {
		for _, svc := range svcs {
			if svc.Spec.Selector != nil && labels.Set(svc.Spec.Selector).AsSelectorPreValidated().Matches(labels.Set(pod.Labels)) {
				set = labels.Merge(set, svc.Spec.Selector)
			}
		}
	}
	sel := set.AsSelector()
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return sel
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return sel
	}
	var ls *metav1.LabelSelector
	switch gv.WithKind(owner.Kind) {
	case rcKind:
		if rc, err := l.rcs.ReplicationControllers(pod.Namespace).Get(owner.Name); err == nil {
			return labels.Merge(set, rc.Spec.Selector).AsSelector()
		}
	case rsKind:
		if rs, err := l.replicaSets.ReplicaSets(pod.Namespace).Get(owner.Name); err == nil {
			ls = rs.Spec.Selector
		}
	case ssKind:
		if ss, err := l.statefulSets.StatefulSets(pod.Namespace).Get(owner.Name); err == nil {
			ls = ss.Spec.Selector
		}
	}
	if ls == nil {
		return sel
	}
	if other, err := metav1.LabelSelectorAsSelector(ls); err == nil {
		if reqs, ok := other.Requirements(); ok {
			sel = sel.Add(reqs...)
		}
	}
	return sel
}
