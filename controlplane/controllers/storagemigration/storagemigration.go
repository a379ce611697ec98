// Package storagemigration is the storage version migrator (kube-controller-manager's
// storage-version-migrator controllers, in one loop): for each storagemigration.k8s.io/v1
// StorageVersionMigration it rewrites every stored object of the named resource through the API, so the
// API server stores it again in its current encoding — the current storage version, and the first key
// of the encryption configuration (how Secrets written before encryption, or under a retired key, are
// re-encrypted).
//
// The steps, as upstream's:
//  1. one migration per resource runs at a time: the oldest unfinished one (creation time, then name)
//     gets Running=True; the others wait;
//  2. the resource is resolved through discovery to its preferred version, which must support list,
//     update and patch; a resource discovery does not know is retried for a minute after the migration's
//     creation (a new CRD may not be served yet), then the migration fails;
//  3. status.resourceVersion records the resource's current list resourceVersion: objects written after
//     it are already in the current encoding;
//  4. every object at or below that resourceVersion gets an empty merge patch carrying its
//     resourceVersion (so a concurrent write wins, and the object is not rewritten twice); a conflict or
//     a vanished object needs no migration; a retriable error (throttling, timeouts) retries the migration
//     with backoff; any other error fails it;
//  5. Succeeded=True and Running=False, or Failed=True with the reason.
package storagemigration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apihelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Name is the controller's name (its field manager and log key).
const Name = "storage-version-migrator"

// Condition reasons, as upstream's controllers write them.
const (
	reasonRunning   = "MigrationRunning"
	reasonCompleted = "MigrationCompleted"
	reasonSucceeded = "StorageVersionMigrationSucceeded"
	reasonFailed    = "StorageVersionMigrationFailed"
)

// discoveryGrace is how long a migration of a resource discovery does not know is retried before it
// fails, as upstream's (twice its 30 s discovery resync).
const discoveryGrace = time.Minute

// pageSize is the number of objects listed per page while migrating.
const pageSize = 500

// Controller is the migrator. Queue keys are migration names (the resource is cluster-scoped).
type Controller struct {
	client    kubernetes.Interface
	crds      apiextensionsclient.CustomResourceDefinitionInterface
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	lister    svmlisters.StorageVersionMigrationLister
	*workloop.Loop
}

// New returns the migrator over factory's StorageVersionMigration informer. dyn patches the objects
// (any resource), meta lists them (metadata only), crds marks a custom resource's definition while its
// objects migrate (nil: custom resources migrate without it). Errors come from registering the event
// handler.
func New(client kubernetes.Interface, crds apiextensionsclient.CustomResourceDefinitionInterface, dyn dynamic.Interface, meta metadata.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if dyn == nil || meta == nil {
		return nil, fmt.Errorf("%s: needs a dynamic and a metadata client", Name)
	}
	inf := factory.Storagemigration().V1().StorageVersionMigrations()
	c := &Controller{client: client, crds: crds, dynamic: dyn, metadata: meta, discovery: client.Discovery(), lister: inf.Lister()}
	c.Loop = workloop.New(Name, c.reconcile, log)
	// Any change may let a waiting migration of the same resource start: every unfinished one is queued.
	requeue := func(any) {
		all, _ := c.lister.List(labels.Everything())
		for _, m := range all {
			if !finished(m) {
				c.Add(m.Name)
			}
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.Enqueue,
		UpdateFunc: func(_, n any) { c.Enqueue(n); requeue(n) },
		DeleteFunc: requeue,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	m, err := c.lister.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if finished(m) {
		return nil
	}
	log := c.Log().With("storageversionmigration", m.Name, "resource", m.Spec.Resource.String())
	m = m.DeepCopy()
	if !meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationRunning)) {
		if first, err := c.firstFor(m.Spec.Resource); err != nil || first != m.Name {
			return err // another migration of the resource goes first; its end requeues this one
		}
		if err := c.markCRD(ctx, m.Spec.Resource, nil, fmt.Sprintf("Migration %s is running", m.Name)); err != nil {
			return err
		}
		setCondition(m, svmv1.MigrationRunning, metav1.ConditionTrue, reasonRunning, "The migration is running")
		return c.writeStatus(ctx, m)
	}
	gvr, kind, found, err := c.resolve(m.Spec.Resource)
	if err != nil {
		return err
	}
	if !found {
		if wait := time.Until(m.CreationTimestamp.Add(discoveryGrace)); wait > 0 {
			c.AddAfter(m.Name, wait)
			return nil
		}
		return c.fail(ctx, m, log, "resource does not exist in discovery")
	}
	if kind == "" {
		return c.fail(ctx, m, log, fmt.Sprintf("resource %q does not support the verbs a migration needs: list, update, patch", gvr))
	}
	if m.Status.ResourceVersion == "" {
		l, err := c.metadata.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("listing %s for its resourceVersion: %w", gvr, err)
		}
		if _, err := resourceversion.CompareResourceVersion(l.ResourceVersion, l.ResourceVersion); err != nil {
			return c.fail(ctx, m, log, fmt.Sprintf("latest resourceVersion for %s is not valid: %v", gvr, err))
		}
		m.Status.ResourceVersion = l.ResourceVersion
		return c.writeStatus(ctx, m)
	}
	migrated, skipped, err := c.migrate(ctx, gvr, kind, m.Status.ResourceVersion)
	if err != nil {
		if retriable(err) || ctx.Err() != nil {
			return err
		}
		return c.fail(ctx, m, log, err.Error())
	}
	done := true
	if err := c.markCRD(ctx, m.Spec.Resource, &done, ""); err != nil {
		return err
	}
	setCondition(m, svmv1.MigrationSucceeded, metav1.ConditionTrue, reasonSucceeded, "Migration completed")
	setCondition(m, svmv1.MigrationRunning, metav1.ConditionFalse, reasonCompleted, "Migration completed")
	log.Info("storage version migration succeeded", "gvr", gvr.String(), "migrated", migrated, "skipped", skipped)
	return c.writeStatus(ctx, m)
}

// migrate rewrites every object of gvr whose resourceVersion is at most checkpoint, and returns how
// many were rewritten and how many needed nothing (written meanwhile, or deleted).
func (c *Controller) migrate(ctx context.Context, gvr schema.GroupVersionResource, kind, checkpoint string) (migrated, skipped int, err error) {
	opts := metav1.ListOptions{Limit: pageSize, ResourceVersion: checkpoint, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	for {
		page, err := c.metadata.Resource(gvr).List(ctx, opts)
		if err != nil {
			return migrated, skipped, fmt.Errorf("listing %s: %w", gvr, err)
		}
		for _, o := range page.Items {
			if cmp, err := resourceversion.CompareResourceVersion(o.ResourceVersion, checkpoint); err != nil {
				return migrated, skipped, fmt.Errorf("%s %s/%s: %w", gvr.Resource, o.Namespace, o.Name, err)
			} else if cmp > 0 {
				skipped++ // written after the checkpoint: already in the current encoding
				continue
			}
			body, _ := json.Marshal(map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
				"metadata": map[string]any{"resourceVersion": o.ResourceVersion}})
			_, err := c.dynamic.Resource(gvr).Namespace(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, body,
				metav1.PatchOptions{FieldManager: Name})
			switch {
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				skipped++
			case err != nil:
				return migrated, skipped, fmt.Errorf("migrating %s %s/%s: %w", gvr.Resource, o.Namespace, o.Name, err)
			default:
				migrated++
			}
		}
		if page.Continue == "" {
			return migrated, skipped, nil
		}
		opts = metav1.ListOptions{Limit: pageSize, Continue: page.Continue}
	}
}

// resolve finds gr's preferred version through discovery, and its kind when the resource supports list,
// update and patch (kind is "" when it does not). found is false when discovery has no such resource.
func (c *Controller) resolve(gr metav1.GroupResource) (gvr schema.GroupVersionResource, kind string, found bool, err error) {
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return gvr, "", false, fmt.Errorf("discovery: %w", err)
	}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil || gv.Group != gr.Group {
			continue
		}
		for _, r := range l.APIResources {
			if r.Name != gr.Resource {
				continue
			}
			gvr = gv.WithResource(r.Name)
			verbs := map[string]bool{}
			for _, v := range r.Verbs {
				verbs[v] = true
			}
			if verbs["list"] && verbs["update"] && verbs["patch"] {
				return gvr, r.Kind, true, nil
			}
			return gvr, "", true, nil
		}
	}
	return gvr, "", false, nil
}

// firstFor is the name of the migration of gr that runs first: one already running, else the oldest
// unfinished one.
func (c *Controller) firstFor(gr metav1.GroupResource) (string, error) {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return "", err
	}
	var waiting []*svmv1.StorageVersionMigration
	for _, m := range all {
		if m.Spec.Resource != gr || finished(m) {
			continue
		}
		if meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationRunning)) {
			return m.Name, nil
		}
		waiting = append(waiting, m)
	}
	if len(waiting) == 0 {
		return "", nil
	}
	sort.Slice(waiting, func(i, j int) bool {
		a, b := waiting[i], waiting[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return waiting[0].Name, nil
}

func (c *Controller) fail(ctx context.Context, m *svmv1.StorageVersionMigration, log *slog.Logger, msg string) error {
	failed := false
	if err := c.markCRD(ctx, m.Spec.Resource, &failed, ""); err != nil {
		return err
	}
	setCondition(m, svmv1.MigrationFailed, metav1.ConditionTrue, reasonFailed, msg)
	setCondition(m, svmv1.MigrationRunning, metav1.ConditionFalse, reasonCompleted, "Migration failed")
	log.Warn("storage version migration failed", "reason", msg)
	return c.writeStatus(ctx, m)
}

// markCRD keeps the StorageMigrating condition of gr's CustomResourceDefinition (named
// <resource>.<group>; other resources have none), as upstream's migration runner: True with running
// while the migration runs (succeeded nil); False when it ends, and on success, when the definition's
// generation is still the one marked at the start, status.storedVersions becomes the storage version
// alone — the objects stored in older versions have all been rewritten.
func (c *Controller) markCRD(ctx context.Context, gr metav1.GroupResource, succeeded *bool, running string) error {
	if c.crds == nil || gr.Group == "" {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.crds.Get(ctx, gr.Resource+"."+gr.Group, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.StorageMigrating,
			Status: apiextensionsv1.ConditionTrue, Reason: reasonRunning, Message: running, ObservedGeneration: crd.Generation,
			LastTransitionTime: metav1.Now()}
		if succeeded != nil {
			cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, "MigrationFailed", "The migration has failed"
			if *succeeded {
				cond.Reason, cond.Message = "MigrationSucceeded", "The migration has succeeded"
				if prev := apihelpers.FindCRDCondition(crd, apiextensionsv1.StorageMigrating); prev != nil && prev.ObservedGeneration == crd.Generation {
					for _, v := range crd.Spec.Versions {
						if v.Storage {
							crd.Status.StoredVersions = []string{v.Name}
						}
					}
					cond.Message += " and the stored versions have been updated"
				} else {
					cond.Message += " but the stored versions have not been updated due to a generation mismatch"
				}
			}
		}
		apihelpers.SetCRDCondition(crd, cond)
		_, err = c.crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: Name})
		return err
	})
}

func (c *Controller) writeStatus(ctx context.Context, m *svmv1.StorageVersionMigration) error {
	_, err := c.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, m, metav1.UpdateOptions{FieldManager: Name})
	return err
}

func setCondition(m *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation})
}

func finished(m *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationFailed))
}

// retriable errors retry the whole migration with backoff instead of failing it.
func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
