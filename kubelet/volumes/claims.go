package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// claimPath resolves a persistentVolumeClaim volume to its host directory: the claim (in the pod's
// namespace) must be Bound, its volume must be bound back to it (claimRef with the claim's UID) and
// admit this node (nodeAffinity), and the volume's source must be a hostPath (its type applied, so a
// local-path volume's DirectoryOrCreate makes the directory) or a local directory that exists. Until
// then the error says what is missing, and the pod's containers do not start.
func (m *Manager) claimPath(ctx context.Context, pod *v1.Pod, claimName string) (string, error) {
	claim, err := m.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q: %w", claimName, err)
	}
	if claim.DeletionTimestamp != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q is being deleted", claimName)
	}
	if claim.Spec.VolumeName == "" || claim.Status.Phase != v1.ClaimBound {
		return "", fmt.Errorf("persistentvolumeclaim %q is not bound (phase %s)", claimName, claim.Status.Phase)
	}
	pv, err := m.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("persistentvolume %q of claim %q: %w", claim.Spec.VolumeName, claimName, err)
	}
	if !storagehelpers.IsVolumeBoundToClaim(pv, claim) || pv.Spec.ClaimRef.UID != claim.UID {
		return "", fmt.Errorf("persistentvolume %q is not bound to claim %q", pv.Name, claimName)
	}
	node, err := m.client.CoreV1().Nodes().Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %q: %w", m.nodeName, err)
	}
	if err := storagehelpers.CheckNodeAffinity(pv, node.Labels); err != nil {
		return "", fmt.Errorf("persistentvolume %q: %w", pv.Name, err)
	}
	switch src := pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		return src.HostPath.Path, checkHostPath(src.HostPath)
	case src.Local != nil:
		fi, err := os.Stat(src.Local.Path)
		if err != nil {
			return "", fmt.Errorf("persistentvolume %q: local path: %w", pv.Name, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("persistentvolume %q: local path %s is not a directory", pv.Name, src.Local.Path)
		}
		return src.Local.Path, nil
	}
	return "", errors.New("persistentvolume " + pv.Name + ": unsupported volume source (supported: hostPath, local)")
}

// ReadOnly reports whether pod's volume name is a persistentVolumeClaim volume with readOnly set, so
// every mount of it is read-only (upstream: the claim source's readOnly overrides the mounts').
func ReadOnly(pod *v1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ReadOnly
		}
	}
	return false
}
