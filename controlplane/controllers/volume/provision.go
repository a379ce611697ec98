package volume

import (
	"context"
	"fmt"
	"path"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/localpath"
)

const (
	// nodeAnnotation on a provisioned volume names the Node its directory is on.
	nodeAnnotation = "storage.nodekit.io/node"
	// helperLabel on a helper pod names the volume whose directory it removes.
	helperLabel = "storage.nodekit.io/delete-volume"
	// helperMount is where a helper pod sees the node's local-path directory.
	helperMount = "/data"
)

// provision creates the local-path volume of claim on node (the node the scheduler selected), pre-bound
// to the claim; binding completes when the volume's event requeues the claim.
func (c *Controller) provision(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node *v1.Node) error {
	if node == nil {
		c.recorder.Eventf(claim, v1.EventTypeWarning, "ProvisioningFailed",
			"%s provisions only for WaitForFirstConsumer classes (a local volume lives on the node of its first pod); storage class %q binds Immediate",
			localpath.Provisioner, class.Name)
		return nil
	}
	dir := node.Annotations[localpath.NodeDirAnnotation]
	name := "pvc-" + string(claim.UID)
	if err := localpath.CheckVolumePath(localpath.VolumePath(dir, name), dir, name); err != nil {
		c.recorder.Eventf(claim, v1.EventTypeWarning, "ProvisioningFailed", "node %q has no usable %s annotation: %v", node.Name, localpath.NodeDirAnnotation, err)
		return fmt.Errorf("provision claim %s/%s on node %s: %w", claim.Namespace, claim.Name, node.Name, err)
	}
	hostname := node.Labels[v1.LabelHostname]
	if hostname == "" {
		return fmt.Errorf("provision claim %s/%s: node %s has no %s label", claim.Namespace, claim.Name, node.Name, v1.LabelHostname)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			storagehelpers.AnnDynamicallyProvisioned: localpath.Provisioner, nodeAnnotation: node.Name}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
				Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: localpath.VolumePath(dir, name), Type: ptr.To(v1.HostPathDirectoryOrCreate)}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
		},
	}
	_, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		c.recorder.Eventf(claim, v1.EventTypeWarning, "ProvisioningFailed", "failed to create volume %s: %v", name, err)
		return fmt.Errorf("provision claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	c.recorder.Eventf(claim, v1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s on node %s", name, node.Name)
	c.claimQ.Log().Info("volume provisioned", "claim", claim.Namespace+"/"+claim.Name, "volume", name, "node", node.Name, "path", pv.Spec.HostPath.Path)
	return nil
}

// reclaimDelete removes a released volume with reclaim policy Delete: a provisioned one's directory
// through a helper pod on its node, then the volume object. Other volumes become Failed.
func (c *Controller) reclaimDelete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] != localpath.Provisioner || pv.Spec.HostPath == nil {
		msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: %v", pv.Name, errNotOurs)
		c.recorder.Event(pv, v1.EventTypeWarning, "VolumeFailedDelete", msg)
		return c.setVolumePhase(ctx, pv, v1.VolumeFailed, msg)
	}
	p := pv.Spec.HostPath.Path
	dir := path.Dir(p)
	if err := localpath.CheckVolumePath(p, dir, pv.Name); err != nil {
		msg := fmt.Sprintf("refusing to delete the directory of volume %q: %v", pv.Name, err)
		c.recorder.Event(pv, v1.EventTypeWarning, "VolumeFailedDelete", msg)
		return c.setVolumePhase(ctx, pv, v1.VolumeFailed, msg)
	}
	nodeName := pv.Annotations[nodeAnnotation]
	if _, err := c.nodes.Get(nodeName); apierrors.IsNotFound(err) {
		// the node and its disk are gone: nothing is left to remove there
		c.volumeQ.Log().Warn("volume's node is gone, deleting the volume without its directory", "volume", pv.Name, "node", nodeName)
		return c.deleteVolume(ctx, pv)
	} else if err != nil {
		return err
	}
	helperName := "delete-" + pv.Name
	helper, err := c.pods.Pods(metav1.NamespaceSystem).Get(helperName)
	if apierrors.IsNotFound(err) {
		_, err := c.client.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, c.helperPod(helperName, pv, nodeName, dir), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("volume %s: create helper pod: %w", pv.Name, err)
		}
		c.volumeQ.Log().Info("removing volume directory", "volume", pv.Name, "node", nodeName, "path", p, "pod", helperName)
		return nil
	}
	if err != nil {
		return err
	}
	switch helper.Status.Phase {
	case v1.PodSucceeded:
		if err := c.deletePod(ctx, helperName); err != nil {
			return err
		}
		return c.deleteVolume(ctx, pv)
	case v1.PodFailed:
		c.recorder.Eventf(pv, v1.EventTypeWarning, "VolumeFailedDelete", "helper pod %s/%s failed to remove %s on node %s", metav1.NamespaceSystem, helperName, p, nodeName)
		if err := c.deletePod(ctx, helperName); err != nil {
			return err
		}
		return fmt.Errorf("volume %s: helper pod failed; retrying", pv.Name)
	}
	return nil // the helper is still running; its status updates requeue the volume
}

func (c *Controller) deletePod(ctx context.Context, name string) error {
	err := c.client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete helper pod %s: %w", name, err)
	}
	return nil
}

func (c *Controller) deleteVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", pv.Name, err)
	}
	c.volumeQ.Log().Info("volume deleted", "volume", pv.Name)
	return nil
}

// helperPod removes <dir>/<volume> on node: the node's local-path directory mounted at /data, and rm
// -rf of the volume's entry in it (k3s's local-path provisioner's teardown helper).
func (c *Controller) helperPod(name string, pv *v1.PersistentVolume, node, dir string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: map[string]string{helperLabel: pv.Name}},
		Spec: v1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                v1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Tolerations:                  []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name: "delete", Image: c.helperImage, ImagePullPolicy: v1.PullIfNotPresent,
				Command:      []string{"rm", "-rf", path.Join(helperMount, pv.Name)},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: helperMount}},
			}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(v1.HostPathDirectory)}}}},
		},
	}
}
