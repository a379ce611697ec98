package statefulset

import (
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = time.Unix(1_000_000, 0)

func testSet(replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid", Generation: 2},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: "web", PodManagementPolicy: policy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "v2"}}}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		},
	}
}

// testPod is pod <set>-<ord> at revision rev: Running and Ready since an hour when ready, else Pending.
func testPod(ord int, rev string, ready bool) *v1.Pod {
	name := "web-" + strconv.Itoa(ord)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels: map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: rev,
			appsv1.StatefulSetPodNameLabel: name, appsv1.PodIndexLabel: strconv.Itoa(ord)}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	if ready {
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	}
	return p
}

func testInput(set *appsv1.StatefulSet, pods ...*v1.Pod) *input {
	old := set.Spec.Template.DeepCopy()
	old.Spec.Containers[0].Image = "v1"
	return &input{set: set, current: revision{name: "web-v1", template: old}, update: revision{name: "web-v2", template: &set.Spec.Template},
		pods: pods, now: now}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func deleted(p *plan) []string {
	var out []string
	for _, d := range p.delete {
		out = append(out, d.pod.Name+"("+d.reason+")")
	}
	return out
}

func expect(t *testing.T, p *plan, create, del []string) {
	t.Helper()
	if got := names(p.create); !slices.Equal(got, create) {
		t.Errorf("create %v, want %v", got, create)
	}
	if got := deleted(p); !slices.Equal(got, del) {
		t.Errorf("delete %v, want %v", got, del)
	}
}

// TestOrderedReadyCreatesOneAtATime: web-0 first; web-1 only once web-0 is Running and Ready; nothing
// while web-1 is Pending (the halt on an unhealthy pod).
func TestOrderedReadyCreatesOneAtATime(t *testing.T) {
	set := testSet(3, appsv1.OrderedReadyPodManagement)
	p := decide(testInput(set))
	expect(t, p, []string{"web-0"}, nil)
	pod := p.create[0]
	if pod.Spec.Hostname != "web-0" || pod.Spec.Subdomain != "web" || pod.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" ||
		pod.Labels[appsv1.PodIndexLabel] != "0" || pod.Labels[appsv1.ControllerRevisionHashLabelKey] != "web-v2" ||
		!metav1.IsControlledBy(pod, set) || pod.Spec.Containers[0].Image != "v2" {
		t.Errorf("web-0: %+v", pod)
	}
	expect(t, decide(testInput(set, testPod(0, "web-v2", false))), nil, nil)
	expect(t, decide(testInput(set, testPod(0, "web-v2", true))), []string{"web-1"}, nil)
	expect(t, decide(testInput(set, testPod(0, "web-v2", true), testPod(1, "web-v2", false))), nil, nil)
	// a missing lower ordinal comes back first, under its old name
	expect(t, decide(testInput(set, testPod(1, "web-v2", true), testPod(2, "web-v2", true))), []string{"web-0"}, nil)
}

// TestMinReadySecondsGatesTheNext: a pod ready for less than minReadySeconds is not available: the
// next waits, and the sync asks to look again when it will be.
func TestMinReadySecondsGatesTheNext(t *testing.T) {
	set := testSet(2, appsv1.OrderedReadyPodManagement)
	set.Spec.MinReadySeconds = 10
	p0 := testPod(0, "web-v2", true)
	p0.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-4 * time.Second))
	p := decide(testInput(set, p0))
	expect(t, p, nil, nil)
	if p.requeue != 6*time.Second || p.status.ReadyReplicas != 1 || p.status.AvailableReplicas != 0 {
		t.Errorf("requeue %v, status %+v", p.requeue, p.status)
	}
}

// TestParallelCreatesAll: Parallel creates every missing pod in one sync, even beside a Pending one.
func TestParallelCreatesAll(t *testing.T) {
	set := testSet(4, appsv1.ParallelPodManagement)
	expect(t, decide(testInput(set, testPod(1, "web-v2", false))), []string{"web-0", "web-2", "web-3"}, nil)
}

// TestOrdinalsStart: ordinals.start 5 names the pods web-5.. and condemns web-0.
func TestOrdinalsStart(t *testing.T) {
	set := testSet(2, appsv1.OrderedReadyPodManagement)
	set.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	p := decide(testInput(set, testPod(5, "web-v2", true), testPod(0, "web-v2", true)))
	expect(t, p, []string{"web-6"}, nil)
	p = decide(testInput(set, testPod(5, "web-v2", true), testPod(6, "web-v2", true), testPod(0, "web-v2", true)))
	expect(t, p, nil, []string{"web-0(scale down)"})
}

// TestScaleDownInReverseOrder: OrderedReady removes the highest ordinal first, one at a time, and waits
// while one terminates; Parallel removes all condemned at once.
func TestScaleDownInReverseOrder(t *testing.T) {
	set := testSet(1, appsv1.OrderedReadyPodManagement)
	pods := []*v1.Pod{testPod(0, "web-v2", true), testPod(1, "web-v2", true), testPod(2, "web-v2", true)}
	expect(t, decide(testInput(set, pods...)), nil, []string{"web-2(scale down)"})
	pods[2].DeletionTimestamp = &metav1.Time{Time: now}
	expect(t, decide(testInput(set, pods...)), nil, nil)
	expect(t, decide(testInput(set, pods[:2]...)), nil, []string{"web-1(scale down)"})
	// an unhealthy replica halts scale-down
	sick := testPod(0, "web-v2", false)
	expect(t, decide(testInput(set, sick, pods[1])), nil, nil)

	par := testSet(1, appsv1.ParallelPodManagement)
	pods[2].DeletionTimestamp = nil
	expect(t, decide(testInput(par, pods...)), nil, []string{"web-2(scale down)", "web-1(scale down)"})
}

// TestFailedPodIsDeletedForRecreation: a Failed replica is deleted (and, once gone, created again
// under the same name); OrderedReady makes no other progress meanwhile.
func TestFailedPodIsDeletedForRecreation(t *testing.T) {
	set := testSet(3, appsv1.OrderedReadyPodManagement)
	failed := testPod(1, "web-v2", false)
	failed.Status.Phase = v1.PodFailed
	expect(t, decide(testInput(set, testPod(0, "web-v2", true), failed)), nil, []string{"web-1(failed)"})
	expect(t, decide(testInput(set, testPod(0, "web-v2", true))), []string{"web-1"}, nil)
}

// TestRollingUpdateHonoursPartition: with partition 1 of 3, web-2 then web-1 are replaced (highest
// first, one at a time with maxUnavailable 1), web-0 never; a recreated pod below the partition gets
// the current revision's template.
func TestRollingUpdateHonoursPartition(t *testing.T) {
	set := testSet(3, appsv1.OrderedReadyPodManagement)
	set.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
	old := func(ord int) *v1.Pod { return testPod(ord, "web-v1", true) }
	p := decide(testInput(set, old(0), old(1), old(2)))
	expect(t, p, nil, []string{"web-2(update)"})
	if p.status.CurrentReplicas != 2 || p.status.UpdatedReplicas != 0 {
		t.Errorf("status %+v", p.status)
	}
	expect(t, decide(testInput(set, old(0), old(1))), []string{"web-2"}, nil)
	// the new web-2 not ready yet: the update waits
	expect(t, decide(testInput(set, old(0), old(1), testPod(2, "web-v2", false))), nil, nil)
	expect(t, decide(testInput(set, old(0), old(1), testPod(2, "web-v2", true))), nil, []string{"web-1(update)"})
	expect(t, decide(testInput(set, old(0), testPod(1, "web-v2", true), testPod(2, "web-v2", true))), nil, nil)
	p = decide(testInput(set, testPod(1, "web-v2", true), testPod(2, "web-v2", true)))
	expect(t, p, []string{"web-0"}, nil)
	if p.create[0].Labels[appsv1.ControllerRevisionHashLabelKey] != "web-v1" || p.create[0].Spec.Containers[0].Image != "v1" {
		t.Errorf("web-0 recreated below the partition: revision %s image %s", p.create[0].Labels[appsv1.ControllerRevisionHashLabelKey], p.create[0].Spec.Containers[0].Image)
	}
}

// TestMaxUnavailable: maxUnavailable 2 replaces two old pods at a time; an unavailable replica uses
// the budget up.
func TestMaxUnavailable(t *testing.T) {
	set := testSet(4, appsv1.OrderedReadyPodManagement)
	set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	old := func(ord int) *v1.Pod { return testPod(ord, "web-v1", true) }
	expect(t, decide(testInput(set, old(0), old(1), old(2), old(3))), nil, []string{"web-3(update)", "web-2(update)"})
	set.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	expect(t, decide(testInput(set, old(0), old(1), old(2), testPod(3, "web-v2", false))), nil, []string{"web-2(update)"})
	// percentages round down but never below 1
	set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("10%"))
	if n := maxUnavailable(set, 4); n != 1 {
		t.Errorf("maxUnavailable 10%% of 4 = %d, want 1", n)
	}
}

// TestOnDeleteLeavesOldPods: OnDelete replaces nothing by itself; a pod the user deleted comes back at
// the update revision.
func TestOnDeleteLeavesOldPods(t *testing.T) {
	set := testSet(2, appsv1.OrderedReadyPodManagement)
	set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	expect(t, decide(testInput(set, testPod(0, "web-v1", true), testPod(1, "web-v1", true))), nil, nil)
	p := decide(testInput(set, testPod(0, "web-v1", true)))
	expect(t, p, []string{"web-1"}, nil)
	if p.create[0].Labels[appsv1.ControllerRevisionHashLabelKey] != "web-v2" {
		t.Errorf("recreated web-1 at %s", p.create[0].Labels[appsv1.ControllerRevisionHashLabelKey])
	}
}

// TestStatusAndCompletion: the counts, and a finished rollout makes the update revision current.
func TestStatusAndCompletion(t *testing.T) {
	set := testSet(2, appsv1.OrderedReadyPodManagement)
	st := status(testInput(set, testPod(0, "web-v1", true), testPod(1, "web-v2", true)), 0)
	if st.Replicas != 2 || st.ReadyReplicas != 2 || st.AvailableReplicas != 2 || st.CurrentReplicas != 1 || st.UpdatedReplicas != 1 ||
		st.ObservedGeneration != 2 || st.CurrentRevision != "web-v1" || st.UpdateRevision != "web-v2" || st.CollisionCount == nil {
		t.Errorf("status %+v", st)
	}
	completeUpdate(set, &st)
	if st.CurrentRevision != "web-v1" {
		t.Errorf("rollout half done but currentRevision %s", st.CurrentRevision)
	}
	st = decide(testInput(set, testPod(0, "web-v2", true), testPod(1, "web-v2", true))).status
	completeUpdate(set, &st)
	if st.CurrentRevision != "web-v2" || st.CurrentReplicas != 2 {
		t.Errorf("rollout done: %+v", st)
	}
}

// TestForeignNamesAreIgnored: a pod whose name is not <set>-<ordinal> is no replica.
func TestForeignNamesAreIgnored(t *testing.T) {
	set := testSet(1, appsv1.OrderedReadyPodManagement)
	other := testPod(0, "web-v2", true)
	other.Name = "webby-0"
	p := decide(testInput(set, other))
	expect(t, p, []string{"web-0"}, nil)
	if p.status.Replicas != 0 {
		t.Errorf("replicas %d", p.status.Replicas)
	}
}
