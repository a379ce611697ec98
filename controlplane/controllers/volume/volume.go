// Package volume is the PersistentVolume controller (upstream pkg/controller/volume/persistentvolume,
// kube-controller-manager's "persistentvolume-binder", much smaller) together with nodekit's local-path
// provisioner (k3s's local-path provisioner is the model):
//
//   - binding: a Pending claim is bound to the smallest Available volume that matches it (storage class,
//     access modes, capacity ≥ request, volumeMode, label selector; component-helpers'
//     FindMatchingVolume) or to the volume it or that volume names (pre-binding). The volume gets
//     spec.claimRef (and pv.kubernetes.io/bound-by-controller when the controller chose it) and phase
//     Bound; the claim gets spec.volumeName, pv.kubernetes.io/bind-completed (and bound-by-controller)
//     and status Bound with the volume's capacity and access modes. A bound claim whose volume is gone
//     becomes Lost.
//   - WaitForFirstConsumer: a claim of such a class is left alone until the scheduler has picked a node
//     for a pod using it and recorded it as the claim's volume.kubernetes.io/selected-node annotation
//     (as upstream's VolumeBinding plugin does); then a volume whose node affinity admits that node is
//     bound, or one is provisioned there.
//   - provisioning: for a class whose provisioner is localpath.Provisioner, a volume pvc-<claim uid> is
//     created on the claim's node: a hostPath (DirectoryOrCreate) at <node's local-path dir>/<volume>,
//     which the kubelet creates when a pod mounts it, with required node affinity to that node's
//     kubernetes.io/hostname, the class's reclaim policy, and claimRef pre-bound to the claim.
//   - protection (upstream's pvc-protection controller): a claim being deleted keeps its
//     kubernetes.io/pvc-protection finalizer (added at creation by the API server) while a pod that is not
//     finished uses it, so its volume is not reclaimed under a running pod.
//   - reclaim: a volume whose claim is deleted becomes Released; with reclaim policy Retain it stays so;
//     with Delete, a provisioned volume's directory is removed on its node by a helper pod (the demo
//     image's rm) and then the volume is deleted. A volume with Delete that the provisioner did not make
//     becomes Failed (nodekit has no deleter for it), as upstream does for plugins without one.
//
// Events use upstream's reasons (ProvisioningSucceeded, ProvisioningFailed, WaitForFirstConsumer,
// FailedBinding, VolumeFailedDelete). Queue keys are claims ("namespace/name") and volumes ("name") on
// two loops.
package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/nodekit/nodekit/controlplane/controllers/events"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
	"github.com/nodekit/nodekit/internal/localpath"
)

// Controller binds claims to volumes, provisions local-path volumes and reclaims released ones.
type Controller struct {
	client   kubernetes.Interface
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	recorder *events.Recorder
	claimQ   *workloop.Loop
	volumeQ  *workloop.Loop
	// helperImage is the image of the helper pods that remove a deleted volume's directory on its
	// node; it must hold rm (bundled.DemoServerV1 by default).
	helperImage string
}

// New registers the controller's handlers on factory's claim, volume, StorageClass, Node and Pod
// informers. helperImage is the image of the directory-removing helper pods (it must have rm).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, helperImage string, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client:      client,
		claims:      factory.Core().V1().PersistentVolumeClaims().Lister(),
		volumes:     factory.Core().V1().PersistentVolumes().Lister(),
		classes:     factory.Storage().V1().StorageClasses().Lister(),
		nodes:       factory.Core().V1().Nodes().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
		recorder:    events.New(client, "persistentvolume-controller"),
		helperImage: helperImage,
	}
	c.claimQ = workloop.New("persistentvolume-binder-claims", c.syncClaim, log)
	c.volumeQ = workloop.New("persistentvolume-binder-volumes", c.syncVolume, log)
	if _, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimQ.Enqueue,
		UpdateFunc: func(_, obj any) { c.claimQ.Enqueue(obj) },
		DeleteFunc: func(obj any) {
			// the claim's volume is released
			if claim, ok := tombstone[*v1.PersistentVolumeClaim](obj); ok && claim.Spec.VolumeName != "" {
				c.volumeQ.Add(claim.Spec.VolumeName)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeQ.Enqueue,
		UpdateFunc: func(_, obj any) { c.volumeQ.Enqueue(obj) },
		DeleteFunc: func(obj any) {
			// a bound claim whose volume is gone is Lost
			if pv, ok := tombstone[*v1.PersistentVolume](obj); ok && pv.Spec.ClaimRef != nil {
				c.claimQ.Add(workloop.KeyOf(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name))
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Storage().V1().StorageClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.requeuePendingClaims() },
	}); err != nil {
		return nil, err
	}
	// helper pods finishing move their volume's deletion on; pods finishing or going release the
	// protection of the claims they use
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok && pod.Labels[helperLabel] != "" {
				c.volumeQ.Add(pod.Labels[helperLabel])
			}
			c.enqueueClaimsOf(obj)
		},
		DeleteFunc: c.enqueueClaimsOf,
	}); err != nil {
		return nil, err
	}
	factory.Core().V1().Nodes().Informer()
	return c, nil
}

func (c *Controller) enqueueClaimsOf(obj any) {
	pod, ok := tombstone[*v1.Pod](obj)
	if !ok {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			c.claimQ.Add(workloop.KeyOf(pod.Namespace, v.PersistentVolumeClaim.ClaimName))
		}
	}
}

func tombstone[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// Run starts the event recorder and both loops' workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.recorder.Start(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.volumeQ.Run(ctx, workers) }()
	c.claimQ.Run(ctx, workers)
	<-done
}

func (c *Controller) requeuePendingClaims() {
	claims, _ := c.claims.List(labels.Everything())
	for _, claim := range claims {
		if claim.Status.Phase == v1.ClaimPending {
			c.claimQ.Add(workloop.KeyOf(claim.Namespace, claim.Name))
		}
	}
}

// syncClaim binds, provisions for or checks one claim.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil {
		return c.releaseProtection(ctx, claim)
	}
	if claim.Spec.VolumeName == "" {
		return c.syncUnboundClaim(ctx, claim)
	}
	pv, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		if _, done := claim.Annotations[storagehelpers.AnnBindCompleted]; done {
			if claim.Status.Phase != v1.ClaimLost {
				c.recorder.Event(claim, v1.EventTypeWarning, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
			}
			return c.setClaimStatus(ctx, claim, v1.ClaimLost, nil)
		}
		return nil // pre-bound to a volume that does not exist yet
	}
	if err != nil {
		return err
	}
	switch {
	case pv.Spec.ClaimRef == nil || storagehelpers.IsVolumeBoundToClaim(pv, claim):
		return c.bind(ctx, pv, claim)
	default:
		c.recorder.Eventf(claim, v1.EventTypeWarning, "FailedBinding", "volume %q already bound to a different claim.", pv.Name)
		return nil
	}
}

func (c *Controller) syncUnboundClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	var class *storagev1.StorageClass
	if className != "" {
		var err error
		if class, err = c.classes.Get(className); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	delay := class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	var node *v1.Node
	if nodeName := claim.Annotations[storagehelpers.AnnSelectedNode]; delay && nodeName != "" {
		n, err := c.nodes.Get(nodeName)
		if err != nil {
			return fmt.Errorf("claim %s/%s: selected node %q: %w", claim.Namespace, claim.Name, nodeName, err)
		}
		node = n
	}
	all, err := c.volumes.List(labels.Everything())
	if err != nil {
		return err
	}
	var candidates []*v1.PersistentVolume
	for _, pv := range all {
		if storagehelpers.CheckAccessModes(claim, pv) {
			candidates = append(candidates, pv)
		}
	}
	pv, err := storagehelpers.FindMatchingVolume(claim, candidates, node, nil, delay && node == nil, false)
	if err != nil {
		return err
	}
	if pv != nil {
		return c.bind(ctx, pv, claim)
	}
	switch {
	case class == nil && className != "":
		c.recorder.Eventf(claim, v1.EventTypeWarning, "ProvisioningFailed", "storageclass.storage.k8s.io %q not found", className)
	case class == nil:
		c.recorder.Event(claim, v1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	case delay && node == nil:
		c.recorder.Event(claim, v1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	case class.Provisioner == localpath.Provisioner:
		return c.provision(ctx, claim, class, node)
	case class.Provisioner == storagehelpers.NotSupportedProvisioner:
		c.recorder.Event(claim, v1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	default:
		c.recorder.Eventf(claim, v1.EventTypeNormal, "ExternalProvisioning", "Waiting for a volume to be created by the external provisioner %q.", class.Provisioner)
	}
	return nil
}

// bind completes the binding of pv and claim in upstream's order: the volume's claimRef and phase
// first, then the claim's volumeName and annotations, then its status.
func (c *Controller) bind(ctx context.Context, pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) error {
	bound, dirty, err := storagehelpers.GetBindVolumeToClaim(pv, claim)
	if err != nil {
		return err
	}
	if dirty {
		if bound, err = c.client.CoreV1().PersistentVolumes().Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind volume %s to claim %s/%s: %w", pv.Name, claim.Namespace, claim.Name, err)
		}
	}
	if bound.Status.Phase != v1.VolumeBound {
		st := bound.DeepCopy()
		st.Status.Phase, st.Status.Message, st.Status.Reason = v1.VolumeBound, "", ""
		if _, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("volume %s status: %w", pv.Name, err)
		}
	}
	updated := claim.DeepCopy()
	changed := false
	if updated.Spec.VolumeName != pv.Name {
		updated.Spec.VolumeName = pv.Name
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		changed = true
	}
	if !metav1.HasAnnotation(updated.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		changed = true
	}
	if changed {
		if updated, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, pv.Name, err)
		}
		c.claimQ.Log().Info("claim bound", "claim", claim.Namespace+"/"+claim.Name, "volume", pv.Name)
	}
	return c.setClaimStatus(ctx, updated, v1.ClaimBound, pv)
}

// setClaimStatus writes phase and, for Bound, the volume's capacity and access modes.
func (c *Controller) setClaimStatus(ctx context.Context, claim *v1.PersistentVolumeClaim, phase v1.PersistentVolumeClaimPhase, pv *v1.PersistentVolume) error {
	st := claim.DeepCopy()
	st.Status.Phase = phase
	if pv != nil {
		st.Status.Capacity = v1.ResourceList{v1.ResourceStorage: pv.Spec.Capacity[v1.ResourceStorage]}
		st.Status.AccessModes = pv.Spec.AccessModes
	}
	if equalClaimStatus(&st.Status, &claim.Status) {
		return nil
	}
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("claim %s/%s status: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func equalClaimStatus(a, b *v1.PersistentVolumeClaimStatus) bool {
	if a.Phase != b.Phase || len(a.AccessModes) != len(b.AccessModes) {
		return false
	}
	for i := range a.AccessModes {
		if a.AccessModes[i] != b.AccessModes[i] {
			return false
		}
	}
	qa, qb := a.Capacity[v1.ResourceStorage], b.Capacity[v1.ResourceStorage]
	return qa.Cmp(qb) == 0 && len(a.Capacity) == len(b.Capacity)
}

// syncVolume sets one volume's phase from its claim and reclaims it when the claim is gone.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || pv.DeletionTimestamp != nil {
		return err
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		if err := c.setVolumePhase(ctx, pv, v1.VolumeAvailable, ""); err != nil {
			return err
		}
		// an Available volume may be what a Pending claim waits for
		c.requeuePendingClaims()
		return nil
	}
	claim, err := c.liveClaim(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return err
	}
	if claim != nil && (ref.UID == "" || claim.UID == ref.UID) {
		if claim.Spec.VolumeName == pv.Name {
			return c.setVolumePhase(ctx, pv, v1.VolumeBound, "")
		}
		c.claimQ.Add(workloop.KeyOf(claim.Namespace, claim.Name))
		return nil
	}
	if ref.UID == "" {
		// pre-bound to a claim not created yet
		return c.setVolumePhase(ctx, pv, v1.VolumeAvailable, "")
	}
	if err := c.setVolumePhase(ctx, pv, v1.VolumeReleased, ""); err != nil {
		return err
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case v1.PersistentVolumeReclaimDelete:
		return c.reclaimDelete(ctx, pv)
	default:
		return nil // Retain: an administrator decides
	}
}

// liveClaim returns the claim from the informer or, when the cache lacks it, from the API server, so a
// volume is never released on a stale cache (nil when it does not exist).
func (c *Controller) liveClaim(ctx context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if err == nil {
		return claim, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	claim, err = c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return claim, err
}

func (c *Controller) setVolumePhase(ctx context.Context, pv *v1.PersistentVolume, phase v1.PersistentVolumePhase, message string) error {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return nil
	}
	st := pv.DeepCopy()
	st.Status.Phase, st.Status.Message = phase, message
	if _, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("volume %s status: %w", pv.Name, err)
	}
	c.volumeQ.Log().Info("volume phase", "volume", pv.Name, "phase", phase)
	return nil
}

var errNotOurs = errors.New("not provisioned by " + localpath.Provisioner)

// releaseProtection removes the pvc-protection finalizer of a claim being deleted once no pod uses it:
// no pod in its namespace that is not Succeeded or Failed names it in a volume (checked on a live list,
// so a pod just created is never missed).
func (c *Controller) releaseProtection(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	i := slices.Index(claim.Finalizers, pvcProtectionFinalizer)
	if i < 0 {
		return nil
	}
	pods, err := c.client.CoreV1().Pods(claim.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
				return nil // in use: the pod's end requeues the claim
			}
		}
	}
	upd := claim.DeepCopy()
	upd.Finalizers = slices.Delete(upd.Finalizers, i, i+1)
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("claim %s/%s: remove %s: %w", claim.Namespace, claim.Name, pvcProtectionFinalizer, err)
	}
	c.claimQ.Log().Info("claim no longer in use, protection removed", "claim", claim.Namespace+"/"+claim.Name)
	return nil
}

// pvcProtectionFinalizer is the finalizer the API server's StorageObjectInUseProtection admission adds.
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"
