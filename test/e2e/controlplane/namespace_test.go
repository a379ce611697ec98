package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestNamespaceDeletionPodsFirst is upstream's OrderedNamespaceDeletion conformance spec against the
// API server and controllers: a namespace whose pod is held by a finalizer stays Terminating with its
// deletion conditions set (NamespaceDeletionContentFailure among them, NamespaceFinalizersRemaining
// naming the finalizer), the pod is being deleted while its configmap is kept, and once the finalizer is
// removed the namespace goes away.
func TestNamespaceDeletionPodsFirst(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns, finalizer = "ordered", "e2e.example.com/finalizer"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{finalizer}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "deletion conditions", func() error {
		got, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := map[v1.NamespaceConditionType]string{
			v1.NamespaceDeletionContentFailure: "ContentDeleted",
			v1.NamespaceFinalizersRemaining:    "SomeFinalizersRemain",
			v1.NamespaceContentRemaining:       "SomeResourcesRemain",
		}
		for _, cond := range got.Status.Conditions {
			if want[cond.Type] == cond.Reason {
				delete(want, cond.Type)
			}
		}
		if got.Status.Phase != v1.NamespaceTerminating || len(want) > 0 {
			return fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("held pod: %v, deletionTimestamp %v", err, p.GetDeletionTimestamp())
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cfg", metav1.GetOptions{}); err != nil {
		t.Fatalf("configmap deleted before the pod: %v", err)
	}

	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "namespace removed", func() error {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v", err)
		}
		return nil
	})
}

// TestNamespaceDeletionRemovesEveryNamespacedKind deletes a namespace holding a Role, a RoleBinding, a
// Job, a CronJob, a PodDisruptionBudget, a ControllerRevision, a PodTemplate, a ReplicationController and a StatefulSet, recreates it under the same name and expects none
// of them back: a RoleBinding left in etcd would grant its permissions again to the new namespace, since
// bindings match subjects by name.
func TestNamespaceDeletionRemovesEveryNamespacedKind(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns = "reused"
	create := func() {
		t.Helper()
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create()
	meta := metav1.ObjectMeta{Name: "x"}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "x"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AppsV1().ControllerRevisions(ns).Create(ctx, &appsv1.ControllerRevision{ObjectMeta: meta, Revision: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PodTemplates(ns).Create(ctx, &v1.PodTemplate{ObjectMeta: meta, Template: v1.PodTemplateSpec{
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(ctx, &v1.ResourceQuota{ObjectMeta: meta,
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("10")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	if _, err := c.Client.CoreV1().ReplicationControllers(ns).Create(ctx, &v1.ReplicationController{ObjectMeta: meta,
		Spec: v1.ReplicationControllerSpec{Replicas: &zero, Template: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suspend := true
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Suspend: &suspend,
		Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{
		Schedule: "0 0 1 1 *", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "namespace removed", func() error {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v", err)
		}
		return nil
	})
	create()
	gets := map[string]func() error{
		"role": func() error { _, err := c.Client.RbacV1().Roles(ns).Get(ctx, "x", metav1.GetOptions{}); return err },
		"rolebinding": func() error {
			_, err := c.Client.RbacV1().RoleBindings(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"poddisruptionbudget": func() error {
			_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"controllerrevision": func() error {
			_, err := c.Client.AppsV1().ControllerRevisions(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"replicationcontroller": func() error {
			_, err := c.Client.CoreV1().ReplicationControllers(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"resourcequota": func() error {
			_, err := c.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"podtemplate": func() error {
			_, err := c.Client.CoreV1().PodTemplates(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"job": func() error { _, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "x", metav1.GetOptions{}); return err },
		"statefulset": func() error {
			_, err := c.Client.AppsV1().StatefulSets(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"cronjob": func() error {
			_, err := c.Client.BatchV1().CronJobs(ns).Get(ctx, "x", metav1.GetOptions{})
			return err
		},
	}
	for kind, get := range gets {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/x survived the deletion of its namespace: %v", kind, ns, err)
		}
	}
}
