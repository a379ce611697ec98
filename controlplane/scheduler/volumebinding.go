package scheduler

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/nodekit/nodekit/internal/localpath"
)

// VolumeBinding failure reasons, as upstream's VolumeBinding plugin words them.
const (
	ReasonVolumeNodeConflict = "node(s) had volume node affinity conflict"
	ReasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	ReasonUnboundImmediate   = "pod has unbound immediate PersistentVolumeClaims"
)

// volumeBinding is upstream's VolumeBinding plugin in small: the Filter checks each claim a pod uses
// (it must exist; a bound claim's volume must admit the node by its node affinity; an unbound claim
// must be of a WaitForFirstConsumer class and have a matching Available volume on the node or a class
// that provisions there), and PreBind records the chosen node on every unbound claim as
// volume.kubernetes.io/selected-node, then waits until the PersistentVolume controller has bound them.
type volumeBinding struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	// bindTimeout bounds PreBind's wait for the claims to be bound (upstream's bindTimeoutSeconds).
	bindTimeout time.Duration
}

func newVolumeBinding(f informers.SharedInformerFactory, onChange func(event string)) (*volumeBinding, []toolscache.InformerSynced, error) {
	vb := &volumeBinding{
		claims:      f.Core().V1().PersistentVolumeClaims().Lister(),
		volumes:     f.Core().V1().PersistentVolumes().Lister(),
		classes:     f.Storage().V1().StorageClasses().Lister(),
		bindTimeout: 10 * time.Minute,
	}
	var synced []toolscache.InformerSynced
	for event, inf := range map[string]toolscache.SharedIndexInformer{
		"PersistentVolumeClaimChange": f.Core().V1().PersistentVolumeClaims().Informer(),
		"PersistentVolumeChange":      f.Core().V1().PersistentVolumes().Informer(),
		"StorageClassChange":          f.Storage().V1().StorageClasses().Informer(),
	} {
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { onChange(event) },
			UpdateFunc: func(any, any) { onChange(event) },
		})
		if err != nil {
			return nil, nil, fmt.Errorf("scheduler: %s handler: %w", event, err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return vb, synced, nil
}

// claimNames are the persistentVolumeClaim volumes' claims of pod.
func claimNames(pod *v1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// filter returns why node cannot host pod's claims (nil: it can).
func (vb *volumeBinding) filter(pi *podInfo, ni *nodeInfo) []string {
	pod := pi.Pod
	for _, name := range claimNames(pod) {
		claim, err := vb.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			return []string{fmt.Sprintf("persistentvolumeclaim %q not found", name)}
		}
		if claim.DeletionTimestamp != nil {
			return []string{fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)}
		}
		if claim.Spec.VolumeName != "" {
			pv, err := vb.volumes.Get(claim.Spec.VolumeName)
			if err != nil {
				return []string{fmt.Sprintf("persistentvolume %q not found", claim.Spec.VolumeName)}
			}
			if storagehelpers.CheckNodeAffinity(pv, ni.Node.Labels) != nil {
				return []string{ReasonVolumeNodeConflict}
			}
			continue
		}
		class := vb.class(claim)
		if class == nil || class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			return []string{ReasonUnboundImmediate}
		}
		if vb.matchingVolume(claim, ni.Node) != nil {
			continue
		}
		switch class.Provisioner {
		case storagehelpers.NotSupportedProvisioner:
			return []string{ReasonVolumeBindConflict}
		case localpath.Provisioner:
			if ni.Node.Annotations[localpath.NodeDirAnnotation] == "" {
				return []string{ReasonVolumeBindConflict}
			}
		}
	}
	return nil
}

func (vb *volumeBinding) class(claim *v1.PersistentVolumeClaim) *storagev1.StorageClass {
	name := storagehelpers.GetPersistentVolumeClaimClass(claim)
	if name == "" {
		return nil
	}
	c, err := vb.classes.Get(name)
	if err != nil {
		return nil
	}
	return c
}

func (vb *volumeBinding) matchingVolume(claim *v1.PersistentVolumeClaim, node *v1.Node) *v1.PersistentVolume {
	all, err := vb.volumes.List(labels.Everything())
	if err != nil {
		return nil
	}
	pv, err := storagehelpers.FindMatchingVolume(claim, all, node, nil, true, false)
	if err != nil {
		return nil
	}
	return pv
}

// preBind annotates pod's unbound claims with the selected node and waits until all are bound. The
// error says which claim is not bound.
func (s *Scheduler) preBind(ctx context.Context, pod *v1.Pod, nodeName string) error {
	vb := s.volumeBinding
	names := claimNames(pod)
	for _, name := range names {
		claim, err := vb.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			return err
		}
		if claim.Spec.VolumeName != "" || claim.Annotations[storagehelpers.AnnSelectedNode] == nodeName {
			continue
		}
		updated := claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, storagehelpers.AnnSelectedNode, nodeName)
		if _, err := s.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("claim %s/%s: set selected node: %w", pod.Namespace, name, err)
		}
		s.log.Info("claim waits for a volume on the selected node", "pod", podKey(pod), "claim", name, "node", nodeName)
	}
	if len(names) == 0 {
		return nil
	}
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, vb.bindTimeout, true, func(context.Context) (bool, error) {
		pending = ""
		for _, name := range names {
			claim, err := vb.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("persistentvolumeclaim %q was deleted", name)
			}
			if err != nil || claim.Status.Phase != v1.ClaimBound {
				pending = name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && pending != "" {
		return fmt.Errorf("persistentvolumeclaim %q not bound: %w", pending, err)
	}
	return err
}
