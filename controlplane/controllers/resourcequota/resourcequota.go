// Package resourcequota is the resource quota controller (kube-controller-manager's
// resourcequota controller): for every ResourceQuota it sets status.hard to spec.hard and recalculates
// status.used from the objects in the quota's namespace, with the evaluators the API server's
// ResourceQuota admission plugin charges by (controlplane/quota). A quota is recalculated in full when
// it is created or its spec.hard changes, when an object it counts in its namespace is created or
// deleted or changes its usage (a pod turning terminal frees its compute resources), and on a periodic
// resync (status edits by others are undone then, as upstream). Objects counted by
// count/<resource>.<group> beyond the built-in evaluators are watched through metadata informers made
// when a quota first names the resource.
package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/controlplane/quota"
)

// DefaultResyncPeriod is how often every quota is recalculated in full (kube-controller-manager's
// --resource-quota-sync-period default).
const DefaultResyncPeriod = 5 * time.Minute

// unresolvedRetry is how soon a quota naming a count/ resource discovery does not list (yet) is synced
// again.
const unresolvedRetry = 10 * time.Second

// Controller is the resource quota controller. Queue keys are quota keys (namespace/name).
type Controller struct {
	client   kubernetes.Interface
	quotas   corelisters.ResourceQuotaLister
	registry quotav1.Registry
	resync   time.Duration

	// counting beyond the built-in evaluators (nil meta: not done, and said so once in the log)
	meta     metadatainformer.SharedInformerFactory
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	mu       sync.Mutex
	counted  map[schema.GroupResource]bool
	runCtx   context.Context
	warnOnce sync.Once

	*workloop.Loop
}

// New returns the controller over factory's informers (pods, services, configmaps, secrets,
// replicationcontrollers, resourcequotas; registered here so the factory starts them). meta, when not
// nil, serves count/<resource>.<group> of other resources (custom resources included); resync <= 0
// means DefaultResyncPeriod.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, meta metadata.Interface, resync time.Duration, log *slog.Logger) (*Controller, error) {
	if resync <= 0 {
		resync = DefaultResyncPeriod
	}
	listers := generic.ListerFuncForResourceFunc(factory.ForResource)
	c := &Controller{
		client:   client,
		quotas:   factory.Core().V1().ResourceQuotas().Lister(),
		registry: generic.NewRegistry(quota.Evaluators(listers)),
		resync:   resync,
		counted:  map[schema.GroupResource]bool{},
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
	}
	if meta != nil {
		c.meta = metadatainformer.NewSharedInformerFactory(meta, 0)
	}
	c.Loop = workloop.New("resourcequota", c.sync, log)
	if _, err := factory.Core().V1().ResourceQuotas().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.Enqueue(obj); c.replenish(obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*v1.ResourceQuota), cur.(*v1.ResourceQuota)
			// status changes are this controller's and admission's own: only a spec change, or a
			// status that has never been computed, calls for a recalculation
			if !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) || n.Status.Used == nil {
				c.Enqueue(cur)
			}
		},
		DeleteFunc: c.replenish,
	}); err != nil {
		return nil, err
	}
	for _, e := range c.registry.List() {
		switch e.GroupResource() {
		case quota.ClaimsResource, v1.Resource("resourcequotas"):
			continue // claims are not served (none ever changes); quotas are handled above
		}
		inf, err := factory.ForResource(e.GroupResource().WithVersion("v1"))
		if err != nil {
			return nil, fmt.Errorf("resourcequota: informer for %s: %w", e.GroupResource(), err)
		}
		if _, err := inf.Informer().AddEventHandler(c.replenisher(e)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// replenisher returns handlers that recalculate the namespace's quotas when an object of e's resource
// is added or deleted, or changes what it uses.
func (c *Controller) replenisher(e quotav1.Evaluator) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.replenish,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(runtime.Object)
			n, ok2 := cur.(runtime.Object)
			if !ok1 || !ok2 {
				return
			}
			ou, err1 := e.Usage(o)
			nu, err2 := e.Usage(n)
			if err1 != nil || err2 != nil || !quotav1.Equals(ou, nu) || scopeChanged(o, n) {
				c.replenish(cur)
			}
		},
		DeleteFunc: c.replenish,
	}
}

// scopeChanged reports whether a pod moved into or out of the Terminating scope (its
// activeDeadlineSeconds changed); the other pod scopes follow immutable fields.
func scopeChanged(old, cur runtime.Object) bool {
	o, ok1 := old.(*v1.Pod)
	n, ok2 := cur.(*v1.Pod)
	return ok1 && ok2 && !apiequality.Semantic.DeepEqual(o.Spec.ActiveDeadlineSeconds, n.Spec.ActiveDeadlineSeconds)
}

// replenish queues every quota of obj's namespace.
func (c *Controller) replenish(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetNamespace() == "" {
		return
	}
	c.enqueueNamespace(m.GetNamespace())
}

func (c *Controller) enqueueNamespace(ns string) {
	qs, err := c.quotas.ResourceQuotas(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range qs {
		c.Add(workloop.KeyOf(q.Namespace, q.Name))
	}
}

// Run runs the workers and the periodic full resync until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	go func() {
		t := time.NewTicker(c.resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.mapper.Reset()
				qs, err := c.quotas.List(labels.Everything())
				if err != nil {
					continue
				}
				for _, q := range qs {
					c.Add(workloop.KeyOf(q.Namespace, q.Name))
				}
			}
		}
	}()
	c.Loop.Run(ctx, workers)
	if c.meta != nil {
		c.meta.Shutdown()
	}
}

// sync recalculates one quota and writes its status when it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if unresolved := c.countResources(q.Spec.Hard); len(unresolved) > 0 {
		c.Log().Debug("quota names resources discovery does not list; they are not counted yet",
			"namespace", ns, "quota", name, "resources", unresolved)
		c.AddAfter(key, unresolvedRetry)
	}
	hard := quotav1.Add(v1.ResourceList{}, q.Spec.Hard)
	used := quotav1.Add(v1.ResourceList{}, q.Status.Used)
	usage, calcErr := quotav1.CalculateUsage(ns, q.Spec.Scopes, hard, c.registry, q.Spec.ScopeSelector)
	for k, v := range usage {
		used[k] = v
	}
	used = quotav1.Mask(used, quotav1.ResourceNames(hard))
	if q.Status.Hard != nil && q.Status.Used != nil && quotav1.Equals(q.Status.Hard, hard) && quotav1.Equals(q.Status.Used, used) {
		return calcErr
	}
	next := q.DeepCopy()
	next.Status = v1.ResourceQuotaStatus{Hard: hard, Used: used}
	if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.Log().Info("quota status updated", "namespace", ns, "quota", name, "used", used)
	return calcErr
}

// countResources makes sure every count/<resource>.<group> of hard has an evaluator, starting a
// metadata informer for resources the built-in evaluators do not cover. It returns the names it could
// not resolve (no such resource served yet, or no metadata client).
func (c *Controller) countResources(hard v1.ResourceList) []v1.ResourceName {
	var unresolved []v1.ResourceName
	for name := range hard {
		gr, ok := countedResource(name)
		if !ok || c.registry.Get(gr) != nil {
			continue
		}
		if c.meta == nil {
			c.warnOnce.Do(func() {
				c.Log().Warn("no metadata client: count/ quotas of resources beyond the built-in evaluators are not counted")
			})
			unresolved = append(unresolved, name)
			continue
		}
		if err := c.watchCounted(gr); err != nil {
			unresolved = append(unresolved, name)
		}
	}
	return unresolved
}

// watchCounted resolves gr through discovery and adds an object count evaluator over a metadata
// informer of it, whose adds and deletes recalculate the namespace's quotas.
func (c *Controller) watchCounted(gr schema.GroupResource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted[gr] {
		return nil
	}
	gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		c.mapper.Reset()
		return err
	}
	inf := c.meta.ForResource(gvr)
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.replenish, DeleteFunc: c.replenish,
	}); err != nil {
		return err
	}
	if c.runCtx != nil {
		c.meta.Start(c.runCtx.Done())
	}
	lister := generic.ListerFuncForResourceFunc(func(schema.GroupVersionResource) (informers.GenericInformer, error) { return inf, nil })
	c.registry.Add(generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(lister, gvr), ""))
	c.counted[gr] = true
	c.Log().Info("quota counts a discovered resource", "resource", gvr.String())
	return nil
}

// countedResource parses count/<resource>[.<group>] (resource names have no dots; the group is the rest).
func countedResource(name v1.ResourceName) (schema.GroupResource, bool) {
	s, ok := strings.CutPrefix(string(name), "count/")
	if !ok || s == "" {
		return schema.GroupResource{}, false
	}
	res, group, _ := strings.Cut(s, ".")
	return schema.GroupResource{Group: group, Resource: res}, true
}
