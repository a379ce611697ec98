package expectations

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// PodHandler is the pod informer handler of a controller whose objects of kind own pods (the
// ReplicaSet, DaemonSet and Job controllers): every event of a pod whose controller owner is of kind
// enqueues the owner's key (workloop.KeyOf); an add observes one creation, and a delete — or the start of
// a graceful delete (deletionTimestamp newly set), as upstream counts it — one deletion. seen, when not
// nil, first gets every pod event's pod, with deleted true for a delete or its start.
func (e *Expectations) PodHandler(kind string, enqueue func(key string), seen func(pod *v1.Pod, deleted bool)) cache.ResourceEventHandlerFuncs {
	on := func(obj any, added, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		if seen != nil {
			seen(pod, deleted)
		}
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.Kind != kind {
			return
		}
		key := workloop.KeyOf(pod.Namespace, ref.Name)
		switch {
		case added:
			e.Observe(key, true)
		case deleted:
			e.Observe(key, false)
		}
		enqueue(key)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { on(obj, true, false) },
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*v1.Pod)
			n, okNew := newObj.(*v1.Pod)
			on(newObj, false, okOld && okNew && o.DeletionTimestamp == nil && n.DeletionTimestamp != nil)
		},
		DeleteFunc: func(obj any) { on(obj, false, true) },
	}
}
