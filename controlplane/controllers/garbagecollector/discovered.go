package garbagecollector

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/resources"
)

// discoveryPeriod is how often the collector asks discovery for resources beyond package resources'
// kinds (a new CRD's objects are collected at most this long after it is served).
const discoveryPeriod = 5 * time.Second

// gcVerbs are what the collector does with a resource's objects.
var gcVerbs = []string{"get", "list", "watch", "patch", "delete"}

// dynamicKind is a discovered kind: its index in Controller.kinds and the stop of its informer.
type dynamicKind struct {
	index int
	stop  context.CancelFunc
}

// discoverEvery runs discover now and then every period until ctx ends.
func (c *Controller) discoverEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		c.discover(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// discover starts a metadata informer for each resource discovery newly lists with gcVerbs (preferred
// version, not in package resources, not events) and stops the informers of the resources no longer
// listed. After a partial discovery failure nothing is removed.
func (c *Controller) discover(ctx context.Context) {
	lists, err := discovery.ServerPreferredResources(c.client.Discovery())
	partial := err != nil
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		c.Log().Warn("garbage collector discovery failed", "err", err)
		return
	}
	seen := map[schema.GroupResource]bool{}
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: gcVerbs}, lists) {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			c.mu.RLock()
			_, known := c.byGK[gv.WithKind(r.Kind).GroupKind()]
			_, tracked := c.dynamic[gr]
			c.mu.RUnlock()
			if r.Name == "events" || (known && !tracked) { // events, or a kind of package resources
				continue
			}
			seen[gr] = true
			if tracked {
				continue
			}
			if err := c.track(ctx, gv.WithResource(r.Name), r.Kind, r.Namespaced); err != nil {
				c.Log().Warn("garbage collector: cannot watch resource", "resource", gr.String(), "err", err)
			}
		}
	}
	if partial {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for gr, d := range c.dynamic {
		if seen[gr] {
			continue
		}
		d.stop()
		delete(c.byGK, c.kinds[d.index].GVK.GroupKind())
		c.infs[d.index] = nil
		delete(c.dynamic, gr)
		c.Log().Info("garbage collector stopped watching resource", "resource", gr.String())
	}
}

// track adds gvr as a kind watched through a metadata informer.
func (c *Controller) track(ctx context.Context, gvr schema.GroupVersionResource, kind string, namespaced bool) error {
	inf := metadatainformer.NewFilteredMetadataInformer(c.meta, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, ownerUIDIndex: ownerUIDs}, nil).Informer()
	c.mu.Lock()
	i := len(c.kinds)
	c.kinds = append(c.kinds, metadataKind(c.meta, gvr, kind, namespaced))
	c.infs = append(c.infs, inf)
	c.byGK[gvr.GroupVersion().WithKind(kind).GroupKind()] = i
	ictx, stop := context.WithCancel(ctx)
	c.dynamic[gvr.GroupResource()] = dynamicKind{index: i, stop: stop}
	c.mu.Unlock()
	if err := c.handle(i, inf); err != nil {
		return err
	}
	go inf.Run(ictx.Done())
	go func() {
		// Objects owned by this kind were checked against owners the collector could not watch yet: an
		// owner deleted before this informer's first list sends no delete event, so once the informer
		// has synced, every dependent naming the kind is looked at again.
		if cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			c.requeueDependentsOf(gvr.GroupVersion().WithKind(kind).GroupKind())
		}
	}()
	c.Log().Info("garbage collector watching resource", "resource", gvr.GroupResource().String(), "version", gvr.Version)
	return nil
}

// requeueDependentsOf queues every object, of every watched kind, with an ownerReference of kind gk.
func (c *Controller) requeueDependentsOf(gk schema.GroupKind) {
	for i, inf := range c.informers() {
		if inf == nil {
			continue
		}
		for _, obj := range inf.GetIndexer().List() {
			m, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			for _, ref := range m.GetOwnerReferences() {
				if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.WithKind(ref.Kind).GroupKind() == gk {
					c.Add("dep|" + strconv.Itoa(i) + "|" + objKey(m))
					break
				}
			}
		}
	}
}

// metadataKind is a resources.Kind whose calls go through the metadata client (the clientset argument
// is unused): what the collector needs of a kind it has no typed client for.
func metadataKind(meta metadata.Interface, gvr schema.GroupVersionResource, kind string, namespaced bool) resources.Kind {
	ri := func(ns string) metadata.ResourceInterface {
		if namespaced {
			return meta.Resource(gvr).Namespace(ns)
		}
		return meta.Resource(gvr)
	}
	return resources.Kind{
		GVK: gvr.GroupVersion().WithKind(kind), Resource: gvr.Resource, Namespaced: namespaced,
		Get: func(ctx context.Context, _ kubernetes.Interface, ns, name string) (metav1.Object, error) {
			o, err := ri(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return o, nil
		},
		Delete: func(ctx context.Context, _ kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
			return ri(ns).Delete(ctx, name, opts)
		},
		Patch: func(ctx context.Context, _ kubernetes.Interface, ns, name string, pt types.PatchType, data []byte) error {
			_, err := ri(ns).Patch(ctx, name, pt, data, metav1.PatchOptions{})
			return err
		},
	}
}
