// Package garbagecollector is the garbage collector: an object whose ownerReferences all point to
// owners that no longer exist (checked live against the API server, not only the cache) is deleted
// with background propagation; references to vanished owners are removed from objects that still
// have a live owner. It also carries out the two deletion modes the API server delegates through
// finalizers on the owner: "orphan" (remove the owner from its dependents' ownerReferences, then the
// finalizer) and "foregroundDeletion" (delete the dependents, and remove the finalizer once none that
// block owner deletion is left). It covers the kinds in package resources through the shared
// informers, and every other resource discovery lists with the get, list, watch, patch and delete verbs
// (custom resources of CRDs, found again every discoveryPeriod) through metadata informers and the
// metadata client, as Kubernetes' garbage collector does.
package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/resources"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

const (
	ownerUIDIndex = "ownerUID"
	// The finalizers the API server puts on an owner deleted with propagationPolicy Orphan / Foreground.
	finalizerOrphan     = metav1.FinalizerOrphanDependents
	finalizerForeground = metav1.FinalizerDeleteDependents
	foregroundRecheck   = time.Second
)

// Controller is the garbage collector. Queue keys are "dep|<kind>|<namespace/name>" for an object
// whose owners must be checked and "own|<kind>|<namespace/name>" for an owner with a deletion
// finalizer to honour.
type Controller struct {
	client kubernetes.Interface
	meta   metadata.Interface
	// mu guards kinds, infs, byGK and dynamic: discovery adds and removes kinds while workers run. A
	// kind's index never changes; a removed kind's informer is nil.
	mu      sync.RWMutex
	kinds   []resources.Kind
	infs    []cache.SharedIndexInformer
	byGK    map[schema.GroupKind]int
	dynamic map[schema.GroupResource]dynamicKind
	*workloop.Loop
}

// New registers informers for every kind in package resources (except Events) on factory. meta, when
// not nil, is the metadata client the discovered kinds (custom resources) are watched and changed with;
// when nil, only package resources' kinds are collected and the log says so.
func New(client kubernetes.Interface, meta metadata.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, meta: meta, byGK: map[schema.GroupKind]int{}, dynamic: map[schema.GroupResource]dynamicKind{}}
	if meta == nil {
		log.Warn("garbage collector: no metadata client; only built-in kinds are collected", "controller", "garbagecollector")
	}
	c.Loop = workloop.New("garbagecollector", c.reconcile, log)
	for _, k := range resources.All() {
		if k.GVK.Kind == "Event" {
			continue
		}
		i := len(c.kinds)
		c.kinds = append(c.kinds, k)
		c.byGK[k.GVK.GroupKind()] = i
		inf := k.Informer(factory)
		if err := inf.AddIndexers(cache.Indexers{ownerUIDIndex: ownerUIDs}); err != nil {
			return nil, fmt.Errorf("garbagecollector: index %s: %w", k.Resource, err)
		}
		c.infs = append(c.infs, inf)
		if err := c.handle(i, inf); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// handle queues inf's objects as kind i.
func (c *Controller) handle(i int, inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onChange(i, obj) },
		UpdateFunc: func(_, obj any) { c.onChange(i, obj) },
		DeleteFunc: c.onDelete,
	})
	return err
}

// Run runs the workers and, with a metadata client, the discovery of further kinds, until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if c.meta != nil {
		go c.discoverEvery(ctx, discoveryPeriod)
	}
	c.Loop.Run(ctx, workers)
}

// at returns kind i and its informer; ok is false for an unknown or removed kind.
func (c *Controller) at(i int) (resources.Kind, cache.SharedIndexInformer, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i < 0 || i >= len(c.kinds) || c.infs[i] == nil {
		return resources.Kind{}, nil, false
	}
	return c.kinds[i], c.infs[i], true
}

// informers returns the informers of the current kinds by index (nil for a removed one).
func (c *Controller) informers() []cache.SharedIndexInformer {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.infs)
}

func ownerUIDs(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, r := range m.GetOwnerReferences() {
		out = append(out, string(r.UID))
	}
	return out, nil
}

func objKey(m metav1.Object) string { return workloop.KeyOf(m.GetNamespace(), m.GetName()) }

func (c *Controller) onChange(kind int, obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if len(m.GetOwnerReferences()) > 0 {
		c.Add("dep|" + strconv.Itoa(kind) + "|" + objKey(m))
	}
	if m.GetDeletionTimestamp() != nil && (slices.Contains(m.GetFinalizers(), finalizerOrphan) || slices.Contains(m.GetFinalizers(), finalizerForeground)) {
		c.Add("own|" + strconv.Itoa(kind) + "|" + objKey(m))
	}
}

// onDelete queues the deleted object's dependents, of every kind.
func (c *Controller) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	for i, inf := range c.informers() {
		if inf == nil {
			continue
		}
		deps, _ := inf.GetIndexer().ByIndex(ownerUIDIndex, string(m.GetUID()))
		for _, d := range deps {
			if dm, err := meta.Accessor(d); err == nil {
				c.Add("dep|" + strconv.Itoa(i) + "|" + objKey(dm))
			}
		}
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	parts := strings.SplitN(key, "|", 3)
	if len(parts) != 3 {
		return nil
	}
	kind, err := strconv.Atoi(parts[1])
	if err != nil {
		return nil
	}
	_, inf, ok := c.at(kind)
	if !ok {
		return nil
	}
	obj, exists, err := inf.GetIndexer().GetByKey(parts[2])
	if err != nil || !exists {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	if parts[0] == "own" {
		return c.processOwner(ctx, kind, m)
	}
	return c.processDependent(ctx, kind, m)
}

type ownerState int

const (
	ownerPresent ownerState = iota
	ownerAbsent
	ownerDeletingForeground
)

// ownerOf reports whether the owner a reference names exists with that UID. The cache answers
// "present"; "absent" is confirmed with a live GET, since the owner may be newer than our cache.
func (c *Controller) ownerOf(ctx context.Context, depNS string, ref metav1.OwnerReference) (ownerState, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ownerPresent, nil
	}
	c.mu.RLock()
	i, ok := c.byGK[gv.WithKind(ref.Kind).GroupKind()]
	c.mu.RUnlock()
	k, inf, known := c.at(i)
	if !ok || !known {
		if c.meta == nil {
			return ownerPresent, nil // a kind we cannot see: never delete on a guess
		}
		// Not discovered yet (a CRD served since the last discovery) or not served at all: never
		// delete on a guess, and look again later, as upstream's collector retries an owner it has no
		// REST mapping for.
		return ownerPresent, fmt.Errorf("owner %s %q: kind %s is not among the resources discovery lists yet", ref.APIVersion, ref.Name, ref.Kind)
	}
	ns := ""
	if k.Namespaced {
		ns = depNS
	}
	state := func(m metav1.Object) ownerState {
		if m.GetUID() != ref.UID {
			return ownerAbsent
		}
		if m.GetDeletionTimestamp() != nil && slices.Contains(m.GetFinalizers(), finalizerForeground) {
			return ownerDeletingForeground
		}
		return ownerPresent
	}
	if obj, exists, _ := inf.GetIndexer().GetByKey(workloop.KeyOf(ns, ref.Name)); exists {
		if m, err := meta.Accessor(obj); err == nil && m.GetUID() == ref.UID {
			return state(m), nil
		}
	}
	live, err := k.Get(ctx, c.client, ns, ref.Name)
	if apierrors.IsNotFound(err) {
		return ownerAbsent, nil
	}
	if err != nil {
		return ownerPresent, err
	}
	return state(live), nil
}

// processDependent deletes an object whose owners are all gone (or all being deleted in foreground
// mode), or, when a live owner remains, drops the references to vanished owners and to owners waiting
// in foreground deletion (which would otherwise wait for an object that stays), as upstream.
func (c *Controller) processDependent(ctx context.Context, kind int, m metav1.Object) error {
	refs := m.GetOwnerReferences()
	if len(refs) == 0 || m.GetDeletionTimestamp() != nil {
		return nil
	}
	var dangling, waiting []types.UID
	live, foreground := 0, 0
	for _, ref := range refs {
		st, err := c.ownerOf(ctx, m.GetNamespace(), ref)
		if err != nil {
			return err
		}
		switch st {
		case ownerAbsent:
			dangling = append(dangling, ref.UID)
		case ownerDeletingForeground:
			foreground++
			waiting = append(waiting, ref.UID)
		default:
			live++
		}
	}
	k, _, ok := c.at(kind)
	if !ok {
		return nil
	}
	if live == 0 && (len(dangling) > 0 || foreground > 0) {
		policy := metav1.DeletePropagationBackground
		if foreground > 0 {
			policy = metav1.DeletePropagationForeground
			// A dependent of m already waiting for its own dependents in foreground deletion may be
			// an owner of m's owners: a circle of blocking references no finalizer would ever leave.
			// As upstream, m's references stop blocking before m is deleted in foreground.
			deps, _ := c.dependents(m.GetUID())
			for _, d := range deps {
				if d.GetDeletionTimestamp() != nil && slices.Contains(d.GetFinalizers(), finalizerForeground) {
					if err := c.unblockOwnerRefs(ctx, k, m); err != nil {
						return err
					}
					break
				}
			}
		}
		uid := m.GetUID()
		err := k.Delete(ctx, c.client, m.GetNamespace(), m.GetName(), metav1.DeleteOptions{
			PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete %s %s: %w", k.Resource, objKey(m), err)
		}
		c.Log().Info("deleted object whose owners are gone", "kind", k.GVK.Kind, "object", objKey(m), "propagation", policy)
		return nil
	}
	if len(dangling)+len(waiting) > 0 {
		return c.removeOwnerRefs(ctx, k, m, append(dangling, waiting...))
	}
	return nil
}

// removeOwnerRefs drops the references with the given owner UIDs from m through a JSON patch that
// tests each entry's uid first, so a concurrent change makes it fail instead of removing the wrong one.
func (c *Controller) removeOwnerRefs(ctx context.Context, k resources.Kind, m metav1.Object, uids []types.UID) error {
	var ops []map[string]any
	refs := m.GetOwnerReferences()
	for i := len(refs) - 1; i >= 0; i-- {
		if !slices.Contains(uids, refs[i].UID) {
			continue
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		ops = append(ops,
			map[string]any{"op": "test", "path": path + "/uid", "value": refs[i].UID},
			map[string]any{"op": "remove", "path": path})
	}
	if len(ops) == 0 {
		return nil
	}
	patch, _ := json.Marshal(ops)
	if err := k.Patch(ctx, c.client, m.GetNamespace(), m.GetName(), types.JSONPatchType, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove owner references from %s %s: %w", k.Resource, objKey(m), err)
	}
	c.Log().Info("removed owner references", "kind", k.GVK.Kind, "object", objKey(m), "owners", len(uids))
	return nil
}

// unblockOwnerRefs sets blockOwnerDeletion false on every reference of m that has it true, through a
// JSON patch testing each entry's uid first (as removeOwnerRefs).
func (c *Controller) unblockOwnerRefs(ctx context.Context, k resources.Kind, m metav1.Object) error {
	var ops []map[string]any
	for i, r := range m.GetOwnerReferences() {
		if r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
			continue
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		ops = append(ops,
			map[string]any{"op": "test", "path": path + "/uid", "value": r.UID},
			map[string]any{"op": "replace", "path": path + "/blockOwnerDeletion", "value": false})
	}
	if len(ops) == 0 {
		return nil
	}
	patch, _ := json.Marshal(ops)
	if err := k.Patch(ctx, c.client, m.GetNamespace(), m.GetName(), types.JSONPatchType, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unblock owner references of %s %s: %w", k.Resource, objKey(m), err)
	}
	c.Log().Info("owner references made non-blocking to break a foreground-deletion circle", "kind", k.GVK.Kind, "object", objKey(m))
	return nil
}

// dependents returns the cached objects of every watched kind that reference the owner uid, with the
// index of each one's kind.
func (c *Controller) dependents(uid types.UID) ([]metav1.Object, []int) {
	var deps []metav1.Object
	var depKinds []int
	for i, inf := range c.informers() {
		if inf == nil {
			continue
		}
		objs, _ := inf.GetIndexer().ByIndex(ownerUIDIndex, string(uid))
		for _, o := range objs {
			if m, err := meta.Accessor(o); err == nil {
				deps = append(deps, m)
				depKinds = append(depKinds, i)
			}
		}
	}
	return deps, depKinds
}

// processOwner honours the orphan and foregroundDeletion finalizers of an owner being deleted.
func (c *Controller) processOwner(ctx context.Context, kind int, owner metav1.Object) error {
	if owner.GetDeletionTimestamp() == nil {
		return nil
	}
	fins := owner.GetFinalizers()
	deps, depKinds := c.dependents(owner.GetUID())
	var errs []error
	switch {
	case slices.Contains(fins, finalizerOrphan):
		for j, d := range deps {
			if k, _, ok := c.at(depKinds[j]); ok {
				errs = append(errs, c.removeOwnerRefs(ctx, k, d, []types.UID{owner.GetUID()}))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return c.removeFinalizer(ctx, kind, owner, finalizerOrphan)
	case slices.Contains(fins, finalizerForeground):
		blocking := 0
		for j, d := range deps {
			for _, r := range d.GetOwnerReferences() {
				if r.UID == owner.GetUID() && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
					blocking++
				}
			}
			if d.GetDeletionTimestamp() == nil {
				errs = append(errs, c.processDependent(ctx, depKinds[j], d))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if blocking > 0 {
			c.AddAfter("own|"+strconv.Itoa(kind)+"|"+objKey(owner), foregroundRecheck)
			return nil
		}
		return c.removeFinalizer(ctx, kind, owner, finalizerForeground)
	}
	return nil
}

// removeFinalizer drops one finalizer with a merge patch guarded by the owner's resourceVersion.
func (c *Controller) removeFinalizer(ctx context.Context, kind int, m metav1.Object, fin string) error {
	rest := slices.DeleteFunc(slices.Clone(m.GetFinalizers()), func(f string) bool { return f == fin })
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": m.GetResourceVersion()}})
	k, _, ok := c.at(kind)
	if !ok {
		return nil
	}
	if err := k.Patch(ctx, c.client, m.GetNamespace(), m.GetName(), types.MergePatchType, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from %s %s: %w", fin, k.Resource, objKey(m), err)
	}
	c.Log().Info("removed deletion finalizer", "kind", k.GVK.Kind, "object", objKey(m), "finalizer", fin)
	return nil
}
