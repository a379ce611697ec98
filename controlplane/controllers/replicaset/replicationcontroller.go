package replicaset

import (
	"context"
	"log/slog"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// NewReplicationControllers registers the ReplicationController controller (upstream's replication
// manager) on factory's ReplicationController and Pod informers: the ReplicaSet controller run on each
// RC's ReplicaSet view (asReplicaSet), its status written back as the RC's (rcStatus).
func NewReplicationControllers(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	lister := factory.Core().V1().ReplicationControllers().Lister()
	return newController(client, factory, "replication", ownerKind{
		gvk:      v1.SchemeGroupVersion.WithKind("ReplicationController"),
		informer: factory.Core().V1().ReplicationControllers().Informer(),
		get: func(ns, name string) (*appsv1.ReplicaSet, runtime.Object, error) {
			rc, err := lister.ReplicationControllers(ns).Get(name)
			if err != nil {
				return nil, nil, err
			}
			return asReplicaSet(rc), rc, nil
		},
		fresh: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{})
		},
		updateStatus: func(ctx context.Context, c kubernetes.Interface, obj runtime.Object, st appsv1.ReplicaSetStatus) error {
			rc := obj.(*v1.ReplicationController).DeepCopy()
			rc.Status = rcStatus(st)
			_, err := c.CoreV1().ReplicationControllers(rc.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
			return err
		},
	}, log)
}

// asReplicaSet is rc as an apps/v1 ReplicaSet: the same metadata, replicas, minReadySeconds and
// template, its selector map as matchLabels, and its status. An RC without a template (the API server
// refuses one) gets an empty template, which no pod is created from since validation fails.
func asReplicaSet(rc *v1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{Replicas: rc.Spec.Replicas, MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector: &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}},
		Status: appsv1.ReplicaSetStatus{Replicas: rc.Status.Replicas, FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas: rc.Status.ReadyReplicas, AvailableReplicas: rc.Status.AvailableReplicas,
			ObservedGeneration: rc.Status.ObservedGeneration},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return rs
}

// rcStatus is a ReplicaSet status as a ReplicationController's (which has no terminatingReplicas).
func rcStatus(st appsv1.ReplicaSetStatus) v1.ReplicationControllerStatus {
	out := v1.ReplicationControllerStatus{Replicas: st.Replicas, FullyLabeledReplicas: st.FullyLabeledReplicas,
		ReadyReplicas: st.ReadyReplicas, AvailableReplicas: st.AvailableReplicas, ObservedGeneration: st.ObservedGeneration}
	for _, c := range st.Conditions {
		out.Conditions = append(out.Conditions, v1.ReplicationControllerCondition{Type: v1.ReplicationControllerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return out
}
