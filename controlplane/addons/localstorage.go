package addons

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/localpath"
)

// defaultClassAnnotation marks the default StorageClass (the DefaultStorageClass admission plugin
// gives it to claims that name none).
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// localStorageObjects is the local-storage add-on (k3s's of the same name): the default StorageClass
// local-path, provisioned by nodekit's PersistentVolume controller (localpath.Provisioner) on the node
// of a claim's first pod (WaitForFirstConsumer), its directory removed when the claim goes (Delete).
func localStorageObjects(client kubernetes.Interface) []object {
	want := &storagev1.StorageClass{
		ObjectMeta:        meta(LocalStorage, "", localpath.DefaultClass, nil),
		Provisioner:       localpath.Provisioner,
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	want.Annotations = map[string]string{defaultClassAnnotation: "true"}
	sc := client.StorageV1().StorageClasses()
	c := typed[*storagev1.StorageClass]{get: sc.Get, create: sc.Create, update: sc.Update, delete: sc.Delete,
		labels: func(x *storagev1.StorageClass) map[string]string { return x.Labels }}
	return []object{{kind: "StorageClass", name: want.Name,
		apply: func(ctx context.Context) (bool, error) {
			return reconcile(ctx, c, want.Name, want, func(have, want *storagev1.StorageClass) bool {
				have.Labels = mergeLabels(have.Labels, want.Labels)
				if have.Annotations == nil {
					have.Annotations = map[string]string{}
				}
				maps.Copy(have.Annotations, want.Annotations)
				have.AllowVolumeExpansion, have.MountOptions, have.AllowedTopologies = nil, nil, nil
				// provisioner, parameters, reclaimPolicy and volumeBindingMode are immutable
				return have.Provisioner == want.Provisioner && len(have.Parameters) == 0 &&
					apiequality.Semantic.DeepEqual(have.ReclaimPolicy, want.ReclaimPolicy) &&
					apiequality.Semantic.DeepEqual(have.VolumeBindingMode, want.VolumeBindingMode)
			})
		},
		remove: func(ctx context.Context) error { return remove(ctx, c, want.Name, LocalStorage) }}}
}
