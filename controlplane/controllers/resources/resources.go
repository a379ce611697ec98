// Package resources is the table of API kinds the namespace controller empties and the garbage
// collector follows: for each kind its group/version/kind, its resource name, whether it is
// namespaced, its shared informer, and typed get/list/delete/patch calls. Kinds not in the table are
// outside nodekit's bundled API server and are not garbage collected.
package resources

import (
	"context"
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kind is one API kind with the calls the controllers need, bound to a clientset.
type Kind struct {
	GVK        schema.GroupVersionKind
	Resource   string
	Namespaced bool
	// Informer returns the kind's shared informer from factory (registering it if needed).
	Informer func(factory informers.SharedInformerFactory) cache.SharedIndexInformer
	// Get returns the live object's metadata; a NotFound error when it does not exist.
	Get func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error)
	// Delete deletes one object with opts.
	Delete func(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error
	// DeleteCollection deletes every object of the kind in ns.
	DeleteCollection func(ctx context.Context, c kubernetes.Interface, ns string, opts metav1.DeleteOptions) error
	// List returns the metadata of every object of the kind in ns.
	List func(ctx context.Context, c kubernetes.Interface, ns string) ([]metav1.Object, error)
	// Count returns how many objects of the kind exist in ns (at most limit when limit > 0).
	Count func(ctx context.Context, c kubernetes.Interface, ns string, limit int64) (int, error)
	// Patch applies a patch of type pt to one object.
	Patch func(ctx context.Context, c kubernetes.Interface, ns, name string, pt types.PatchType, data []byte) error
}

// collectionDeleter is implemented by typed clients of kinds that support deletecollection (Services
// and Namespaces do not).
type collectionDeleter interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// typed is the part of every client-go typed resource client the table uses.
type typed[T metav1.Object, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

func kind[T metav1.Object, L runtime.Object](gvk schema.GroupVersionKind, resource string, namespaced bool,
	client func(c kubernetes.Interface, ns string) typed[T, L], inf func(informers.SharedInformerFactory) cache.SharedIndexInformer) Kind {
	return Kind{
		GVK: gvk, Resource: resource, Namespaced: namespaced, Informer: inf,
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return client(c, ns).Get(ctx, name, metav1.GetOptions{})
		},
		Delete: func(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
			return client(c, ns).Delete(ctx, name, opts)
		},
		DeleteCollection: func(ctx context.Context, c kubernetes.Interface, ns string, opts metav1.DeleteOptions) error {
			tc := client(c, ns)
			if dc, ok := any(tc).(collectionDeleter); ok {
				return dc.DeleteCollection(ctx, opts, metav1.ListOptions{})
			}
			items, err := listMeta(ctx, tc)
			if err != nil {
				return err
			}
			var errs []error
			for _, m := range items {
				if err := tc.Delete(ctx, m.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
		List: func(ctx context.Context, c kubernetes.Interface, ns string) ([]metav1.Object, error) {
			return listMeta(ctx, client(c, ns))
		},
		Count: func(ctx context.Context, c kubernetes.Interface, ns string, limit int64) (int, error) {
			l, err := client(c, ns).List(ctx, metav1.ListOptions{Limit: limit})
			if err != nil {
				return 0, err
			}
			return meta.LenList(l), nil
		},
		Patch: func(ctx context.Context, c kubernetes.Interface, ns, name string, pt types.PatchType, data []byte) error {
			_, err := client(c, ns).Patch(ctx, name, pt, data, metav1.PatchOptions{})
			return err
		},
	}
}

// listMeta lists every object of tc and returns their metadata.
func listMeta[T metav1.Object, L runtime.Object](ctx context.Context, tc typed[T, L]) ([]metav1.Object, error) {
	l, err := tc.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(items))
	for _, it := range items {
		if m, err := meta.Accessor(it); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

var (
	core    = v1.SchemeGroupVersion
	apps    = appsv1.SchemeGroupVersion
	disco   = discoveryv1.SchemeGroupVersion
	coord   = coordinationv1.SchemeGroupVersion
	batch   = batchv1.SchemeGroupVersion
	policy  = policyv1.SchemeGroupVersion
	network = networkingv1.SchemeGroupVersion
	rbac    = rbacv1.SchemeGroupVersion
	storage = storagev1.SchemeGroupVersion
)

// All returns the kinds of nodekit's bundled API server, workloads first (so a namespace's
// Deployments go before the pods they would otherwise recreate).
func All() []Kind {
	return []Kind{
		// CronJobs first: they make Jobs, which make pods.
		kind(batch.WithKind("CronJob"), "cronjobs", true,
			func(c kubernetes.Interface, ns string) typed[*batchv1.CronJob, *batchv1.CronJobList] {
				return c.BatchV1().CronJobs(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Batch().V1().CronJobs().Informer()
			}),
		kind(apps.WithKind("Deployment"), "deployments", true,
			func(c kubernetes.Interface, ns string) typed[*appsv1.Deployment, *appsv1.DeploymentList] {
				return c.AppsV1().Deployments(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().Deployments().Informer()
			}),
		kind(apps.WithKind("DaemonSet"), "daemonsets", true,
			func(c kubernetes.Interface, ns string) typed[*appsv1.DaemonSet, *appsv1.DaemonSetList] {
				return c.AppsV1().DaemonSets(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().DaemonSets().Informer()
			}),
		kind(apps.WithKind("StatefulSet"), "statefulsets", true,
			func(c kubernetes.Interface, ns string) typed[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
				return c.AppsV1().StatefulSets(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().StatefulSets().Informer()
			}),
		kind(apps.WithKind("ReplicaSet"), "replicasets", true,
			func(c kubernetes.Interface, ns string) typed[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
				return c.AppsV1().ReplicaSets(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().ReplicaSets().Informer()
			}),
		kind(core.WithKind("ResourceQuota"), "resourcequotas", true,
			func(c kubernetes.Interface, ns string) typed[*v1.ResourceQuota, *v1.ResourceQuotaList] {
				return c.CoreV1().ResourceQuotas(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().ResourceQuotas().Informer()
			}),
		kind(core.WithKind("ReplicationController"), "replicationcontrollers", true,
			func(c kubernetes.Interface, ns string) typed[*v1.ReplicationController, *v1.ReplicationControllerList] {
				return c.CoreV1().ReplicationControllers(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().ReplicationControllers().Informer()
			}),
		kind(core.WithKind("Pod"), "pods", true,
			func(c kubernetes.Interface, ns string) typed[*v1.Pod, *v1.PodList] { return c.CoreV1().Pods(ns) },
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Pods().Informer()
			}),
		kind(core.WithKind("Service"), "services", true,
			func(c kubernetes.Interface, ns string) typed[*v1.Service, *v1.ServiceList] {
				return c.CoreV1().Services(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Services().Informer()
			}),
		kind(disco.WithKind("EndpointSlice"), "endpointslices", true,
			func(c kubernetes.Interface, ns string) typed[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
				return c.DiscoveryV1().EndpointSlices(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Discovery().V1().EndpointSlices().Informer()
			}),
		kind(core.WithKind("Endpoints"), "endpoints", true,
			func(c kubernetes.Interface, ns string) typed[*v1.Endpoints, *v1.EndpointsList] {
				return c.CoreV1().Endpoints(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Endpoints().Informer()
			}),
		kind(core.WithKind("ConfigMap"), "configmaps", true,
			func(c kubernetes.Interface, ns string) typed[*v1.ConfigMap, *v1.ConfigMapList] {
				return c.CoreV1().ConfigMaps(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().ConfigMaps().Informer()
			}),
		kind(core.WithKind("Secret"), "secrets", true,
			func(c kubernetes.Interface, ns string) typed[*v1.Secret, *v1.SecretList] {
				return c.CoreV1().Secrets(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Secrets().Informer()
			}),
		kind(core.WithKind("ServiceAccount"), "serviceaccounts", true,
			func(c kubernetes.Interface, ns string) typed[*v1.ServiceAccount, *v1.ServiceAccountList] {
				return c.CoreV1().ServiceAccounts(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().ServiceAccounts().Informer()
			}),
		kind(core.WithKind("PersistentVolumeClaim"), "persistentvolumeclaims", true,
			func(c kubernetes.Interface, ns string) typed[*v1.PersistentVolumeClaim, *v1.PersistentVolumeClaimList] {
				return c.CoreV1().PersistentVolumeClaims(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().PersistentVolumeClaims().Informer()
			}),
		kind(coord.WithKind("Lease"), "leases", true,
			func(c kubernetes.Interface, ns string) typed[*coordinationv1.Lease, *coordinationv1.LeaseList] {
				return c.CoordinationV1().Leases(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Coordination().V1().Leases().Informer()
			}),
		kind(core.WithKind("Event"), "events", true,
			func(c kubernetes.Interface, ns string) typed[*v1.Event, *v1.EventList] { return c.CoreV1().Events(ns) },
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Events().Informer()
			}),
		kind(core.WithKind("PodTemplate"), "podtemplates", true,
			func(c kubernetes.Interface, ns string) typed[*v1.PodTemplate, *v1.PodTemplateList] {
				return c.CoreV1().PodTemplates(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().PodTemplates().Informer()
			}),
		kind(apps.WithKind("ControllerRevision"), "controllerrevisions", true,
			func(c kubernetes.Interface, ns string) typed[*appsv1.ControllerRevision, *appsv1.ControllerRevisionList] {
				return c.AppsV1().ControllerRevisions(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().ControllerRevisions().Informer()
			}),
		kind(batch.WithKind("Job"), "jobs", true,
			func(c kubernetes.Interface, ns string) typed[*batchv1.Job, *batchv1.JobList] {
				return c.BatchV1().Jobs(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Batch().V1().Jobs().Informer()
			}),
		kind(autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"), "horizontalpodautoscalers", true,
			func(c kubernetes.Interface, ns string) typed[*autoscalingv2.HorizontalPodAutoscaler, *autoscalingv2.HorizontalPodAutoscalerList] {
				return c.AutoscalingV2().HorizontalPodAutoscalers(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
			}),
		kind(policy.WithKind("PodDisruptionBudget"), "poddisruptionbudgets", true,
			func(c kubernetes.Interface, ns string) typed[*policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudgetList] {
				return c.PolicyV1().PodDisruptionBudgets(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Policy().V1().PodDisruptionBudgets().Informer()
			}),
		kind(network.WithKind("Ingress"), "ingresses", true,
			func(c kubernetes.Interface, ns string) typed[*networkingv1.Ingress, *networkingv1.IngressList] {
				return c.NetworkingV1().Ingresses(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Networking().V1().Ingresses().Informer()
			}),
		kind(network.WithKind("NetworkPolicy"), "networkpolicies", true,
			func(c kubernetes.Interface, ns string) typed[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList] {
				return c.NetworkingV1().NetworkPolicies(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Networking().V1().NetworkPolicies().Informer()
			}),
		// Roles and RoleBindings go with their namespace: bindings match subjects by name, so ones left
		// behind would grant their permissions again to a namespace created later under the same name.
		kind(rbac.WithKind("Role"), "roles", true,
			func(c kubernetes.Interface, ns string) typed[*rbacv1.Role, *rbacv1.RoleList] {
				return c.RbacV1().Roles(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Rbac().V1().Roles().Informer()
			}),
		kind(rbac.WithKind("RoleBinding"), "rolebindings", true,
			func(c kubernetes.Interface, ns string) typed[*rbacv1.RoleBinding, *rbacv1.RoleBindingList] {
				return c.RbacV1().RoleBindings(ns)
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Rbac().V1().RoleBindings().Informer()
			}),
		kind(core.WithKind("Node"), "nodes", false,
			func(c kubernetes.Interface, _ string) typed[*v1.Node, *v1.NodeList] { return c.CoreV1().Nodes() },
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Nodes().Informer()
			}),
		kind(core.WithKind("PersistentVolume"), "persistentvolumes", false,
			func(c kubernetes.Interface, _ string) typed[*v1.PersistentVolume, *v1.PersistentVolumeList] {
				return c.CoreV1().PersistentVolumes()
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().PersistentVolumes().Informer()
			}),
		kind(storage.WithKind("StorageClass"), "storageclasses", false,
			func(c kubernetes.Interface, _ string) typed[*storagev1.StorageClass, *storagev1.StorageClassList] {
				return c.StorageV1().StorageClasses()
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Storage().V1().StorageClasses().Informer()
			}),
		kind(core.WithKind("Namespace"), "namespaces", false,
			func(c kubernetes.Interface, _ string) typed[*v1.Namespace, *v1.NamespaceList] {
				return c.CoreV1().Namespaces()
			},
			func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Namespaces().Informer()
			}),
	}
}
