package volume

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
	"github.com/nodekit/nodekit/internal/localpath"
)

func newClaim(name string, class *string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: class,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
}

func start(t *testing.T, objs ...any) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.PersistentVolume:
			_, err = client.CoreV1().PersistentVolumes().Create(context.Background(), o, metav1.CreateOptions{})
		case *v1.PersistentVolumeClaim:
			_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *storagev1.StorageClass:
			_, err = client.StorageV1().StorageClasses().Create(context.Background(), o, metav1.CreateOptions{})
		case *v1.Node:
			_, err = client.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	controllertest.StatusSubresource(client, "persistentvolumes", "persistentvolumeclaims")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, "helper:1", controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	return client
}

// TestBindStatic: a Pending claim binds to the smallest matching Available volume of its class (not
// to a smaller one, one of another class or one lacking its access mode), with upstream's annotations.
func TestBindStatic(t *testing.T) {
	pv := func(name, size, class string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}, AccessModes: modes, StorageClassName: class,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, VolumeMode: ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/" + name}}},
			Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable}}
	}
	rwo, rox := v1.ReadWriteOnce, v1.ReadOnlyMany
	client := start(t, pv("small", "512Mi", "manual", rwo), pv("other-class", "1Gi", "fast", rwo), pv("rox", "1Gi", "manual", rox),
		pv("big", "10Gi", "manual", rwo), pv("fit", "2Gi", "manual", rwo), newClaim("c", ptr.To("manual")))
	ctx := context.Background()
	controllertest.Eventually(t, "claim bound to fit", func() error {
		c, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
		if err != nil || c.Status.Phase != v1.ClaimBound || c.Spec.VolumeName != "fit" {
			return fmt.Errorf("claim %v %v %v", c.Spec.VolumeName, c.Status.Phase, err)
		}
		if c.Annotations[storagehelpers.AnnBindCompleted] != "yes" || c.Annotations[storagehelpers.AnnBoundByController] != "yes" {
			return fmt.Errorf("annotations %v", c.Annotations)
		}
		if q := c.Status.Capacity[v1.ResourceStorage]; q.String() != "2Gi" {
			return fmt.Errorf("capacity %s", q.String())
		}
		p, err := client.CoreV1().PersistentVolumes().Get(ctx, "fit", metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.VolumeBound || p.Spec.ClaimRef == nil || p.Spec.ClaimRef.UID != c.UID ||
			p.Annotations[storagehelpers.AnnBoundByController] != "yes" {
			return fmt.Errorf("volume %+v %v", p, err)
		}
		return nil
	})
}

// TestProvisionAndDelete: a WaitForFirstConsumer claim of the local-path class is provisioned on its
// selected node under the node's directory, bound; once deleted, a helper pod removes the directory
// and, when it succeeded, the volume is deleted.
func TestProvisionAndDelete(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: localpath.Provisioner,
		ReclaimPolicy: ptr.To(v1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelHostname: "n1"},
		Annotations: map[string]string{localpath.NodeDirAnnotation: "/var/lib/nodekit/storage"}}}
	claim := newClaim("data", ptr.To("local-path"))
	client := start(t, class, node, claim)
	ctx := context.Background()
	controllertest.Modify(t, func() (*v1.PersistentVolumeClaim, error) {
		return client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
	}, func(c *v1.PersistentVolumeClaim) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnSelectedNode, "n1")
	}, func(c *v1.PersistentVolumeClaim) error {
		_, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	name := "pvc-uid-data"
	controllertest.Eventually(t, "volume provisioned and bound", func() error {
		p, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.HostPath == nil || p.Spec.HostPath.Path != "/var/lib/nodekit/storage/"+name || p.Status.Phase != v1.VolumeBound ||
			p.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n1" {
			return fmt.Errorf("volume %+v", p)
		}
		c, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		if c.Spec.VolumeName != name || c.Status.Phase != v1.ClaimBound {
			return fmt.Errorf("claim %s %s", c.Spec.VolumeName, c.Status.Phase)
		}
		return nil
	})
	if err := client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var helper *v1.Pod
	controllertest.Eventually(t, "helper pod", func() error {
		var err error
		helper, err = client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, "delete-"+name, metav1.GetOptions{})
		return err
	})
	if helper.Spec.NodeName != "n1" || helper.Spec.Volumes[0].HostPath.Path != "/var/lib/nodekit/storage" ||
		fmt.Sprint(helper.Spec.Containers[0].Command) != "[rm -rf /data/"+name+"]" {
		t.Fatalf("helper pod %+v", helper.Spec)
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("volume deleted before its directory: %v", err)
	}
	helper.Status.Phase = v1.PodSucceeded
	if _, err := client.CoreV1().Pods(metav1.NamespaceSystem).UpdateStatus(ctx, helper, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "volume and helper deleted", func() error {
		if _, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume: %v", err)
		}
		if _, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, helper.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("helper: %v", err)
		}
		return nil
	})
}
