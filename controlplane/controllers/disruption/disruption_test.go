package disruption

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// fixture: a Deployment of 4 (spec) owning a ReplicaSet whose 3 pods are listed, 2 of them ready.
func fixture(t *testing.T, now time.Time) (*Controller, informers.SharedInformerFactory, []*v1.Pod) {
	t.Helper()
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, f, func() time.Time { return now }, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "dep-uid"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "d-1", Namespace: "ns", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "dep-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)}}
	must(t, f.Apps().V1().Deployments().Informer().GetIndexer().Add(dep))
	must(t, f.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(rs))
	var pods []*v1.Pod
	for i, ready := range []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionTrue, v1.ConditionFalse} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('0'+i)), Namespace: "ns", Labels: map[string]string{"app": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "d-1", UID: types.UID("rs-uid"), Controller: ptr.To(true)}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}}}}
		must(t, f.Core().V1().Pods().Informer().GetIndexer().Add(p))
		pods = append(pods, p)
	}
	return c, f, pods
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func budget(minA, maxU *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Generation: 3},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minA, MaxUnavailable: maxU,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
}

// TestCompute checks the counts upstream's getExpectedPodCount gives: an integer minAvailable counts
// the matched pods; a percentage or maxUnavailable counts the owning Deployment's replicas (4, not
// the ReplicaSet's 3), rounding up.
func TestCompute(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name                               string
		minA, maxU                         *intstr.IntOrString
		expected, desired, healthy, allowd int32
	}{
		{"minAvailable 1", ptr.To(intstr.FromInt32(1)), nil, 3, 1, 2, 1},
		{"minAvailable 50%", ptr.To(intstr.FromString("50%")), nil, 4, 2, 2, 0},
		{"minAvailable 25%", ptr.To(intstr.FromString("25%")), nil, 4, 1, 2, 1},
		{"maxUnavailable 1", nil, ptr.To(intstr.FromInt32(1)), 4, 3, 2, 0},
		{"maxUnavailable 60%", nil, ptr.To(intstr.FromString("60%")), 4, 1, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := fixture(t, now)
			st, _, err := c.compute(budget(tc.minA, tc.maxU))
			must(t, err)
			if st.ExpectedPods != tc.expected || st.DesiredHealthy != tc.desired || st.CurrentHealthy != tc.healthy ||
				st.DisruptionsAllowed != tc.allowd || st.ObservedGeneration != 3 {
				t.Fatalf("status %+v", st)
			}
			want := metav1.ConditionFalse
			if tc.allowd > 0 {
				want = metav1.ConditionTrue
			}
			if len(st.Conditions) != 1 || st.Conditions[0].Type != policyv1.DisruptionAllowedCondition || st.Conditions[0].Status != want {
				t.Fatalf("conditions %+v", st.Conditions)
			}
		})
	}
}

// TestDisruptedPods: an eviction recorded less than DeletionTimeout ago keeps its (still running)
// pod out of currentHealthy and schedules a recheck when it expires; an expired one or one whose pod
// is gone is dropped.
func TestDisruptedPods(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c, _, pods := fixture(t, now)
	b := budget(ptr.To(intstr.FromInt32(1)), nil)
	b.Status.DisruptedPods = map[string]metav1.Time{
		pods[0].Name: {Time: now.Add(-30 * time.Second)},
		pods[1].Name: {Time: now.Add(-3 * time.Minute)},
		"gone":       {Time: now},
	}
	st, recheck, err := c.compute(b)
	must(t, err)
	if len(st.DisruptedPods) != 1 || st.DisruptedPods[pods[0].Name].Time.IsZero() || recheck != 90*time.Second {
		t.Fatalf("disruptedPods %v, recheck %v", st.DisruptedPods, recheck)
	}
	if st.CurrentHealthy != 1 || st.DisruptionsAllowed != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestNoScaleIsSyncFailed: a percentage budget over a pod with no controller cannot be computed; the
// fail-safe status allows no disruption.
func TestNoScaleIsSyncFailed(t *testing.T) {
	c, f, pods := fixture(t, time.Now())
	orphan := pods[0].DeepCopy()
	orphan.Name, orphan.OwnerReferences = "orphan", nil
	must(t, f.Core().V1().Pods().Informer().GetIndexer().Add(orphan))
	b := budget(ptr.To(intstr.FromString("50%")), nil)
	_, _, err := c.compute(b)
	if err == nil || !strings.Contains(err.Error(), `found no controller ref for pod "orphan"`) {
		t.Fatalf("compute: want no-controller error, got %v", err)
	}
	st := failSafe(b, err)
	if st.DisruptionsAllowed != 0 || st.Conditions[0].Reason != policyv1.SyncFailedReason || st.Conditions[0].Status != metav1.ConditionFalse {
		t.Fatalf("fail-safe status %+v", st)
	}
}

// TestComputeReplicationControllerScale: pods of a ReplicationController count its spec.replicas, as
// upstream's getPodReplicationController finder does (5 expected from 2 listed pods).
func TestComputeReplicationControllerScale(t *testing.T) {
	c, f, _ := fixture(t, time.Unix(1_000_000, 0))
	rc := &v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns", UID: "rc-uid"},
		Spec: v1.ReplicationControllerSpec{Replicas: ptr.To[int32](5)}}
	must(t, f.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(rc))
	for _, name := range []string{"r0", "r1"} {
		must(t, f.Core().V1().Pods().Informer().GetIndexer().Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels:          map[string]string{"app": "rc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "rc-uid", Controller: ptr.To(true)}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}}))
	}
	b := budget(nil, ptr.To(intstr.FromInt32(1)))
	b.Spec.Selector.MatchLabels = map[string]string{"app": "rc"}
	st, _, err := c.compute(b)
	must(t, err)
	if st.ExpectedPods != 5 || st.DesiredHealthy != 4 || st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 {
		t.Fatalf("status = %+v, want expected 5, desired 4, healthy 2, allowed 0", st)
	}
}

// TestStatefulSetScale: a StatefulSet pod's expected count is the set's spec.replicas (5 here, beside
// the Deployment's 4), as upstream's getPodStatefulSet finder gives; a pod whose ownerReference names
// a StatefulSet of another UID is an error.
func TestStatefulSetScale(t *testing.T) {
	c, f, pods := fixture(t, time.Now())
	must(t, f.Apps().V1().StatefulSets().Informer().GetIndexer().Add(&appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "sts-uid"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5)}}))
	web := pods[0].DeepCopy()
	web.Name = "web-0"
	web.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: ptr.To(true)}}
	must(t, f.Core().V1().Pods().Informer().GetIndexer().Add(web))
	st, _, err := c.compute(budget(nil, ptr.To(intstr.FromInt32(1))))
	must(t, err)
	if st.ExpectedPods != 9 || st.DesiredHealthy != 8 || st.CurrentHealthy != 3 {
		t.Fatalf("status %+v, want expectedPods 9 (Deployment 4 + StatefulSet 5), desiredHealthy 8, currentHealthy 3", st)
	}
	web.OwnerReferences[0].UID = "other"
	must(t, f.Core().V1().Pods().Informer().GetIndexer().Update(web))
	if _, _, err := c.compute(budget(nil, ptr.To(intstr.FromInt32(1)))); err == nil || !strings.Contains(err.Error(), "StatefulSet web has UID sts-uid, not other") {
		t.Fatalf("compute with a stale owner UID: %v", err)
	}
}
