package pod

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store/storetest"
)

// TestTableColumns: kubectl's pod columns in order, the -o wide ones (priority 1) after AGE.
func TestTableColumns(t *testing.T) {
	columns, wide, cells := storetest.Row(t, tableConvertor, running())
	if columns != "Name|Ready|Status|Restarts|Age" || wide != "IP|Node|Nominated Node|Readiness Gates" {
		t.Fatalf("columns %s, wide %s", columns, wide)
	}
	want := []any{"web-1", "2/2", "Running", "2 (25m ago)", "3h", "10.244.0.7", "node-1", "<none>", "<none>"}
	if !reflect.DeepEqual(cells, want) {
		t.Fatalf("cells %#v, want %#v", cells, want)
	}
}

// running is a Running pod of two ready containers on node-1, one restarted twice, the last 25 minutes ago.
func running() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", CreationTimestamp: metav1.NewTime(time.Now().Add(-3 * time.Hour))},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app"}, {Name: "log"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.7", PodIPs: []corev1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				{Name: "log", Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
						FinishedAt: metav1.NewTime(time.Now().Add(-25*time.Minute - 10*time.Second))}}},
			}},
	}
}

// TestPodRow: READY, STATUS, RESTARTS and the wide cells for the states kubectl distinguishes.
func TestPodRow(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	started := true
	now := metav1.Now()
	cases := []struct {
		name string
		edit func(p *corev1.Pod)
		want []any
	}{
		{"pending unscheduled", func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "node-2"}
		}, []any{"0/2", "Pending", "0", "<none>", "<none>", "node-2", "<none>"}},
		{"crash loop", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].Ready = false
			p.Status.ContainerStatuses[1].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}, []any{"1/2", "CrashLoopBackOff", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"killed without reason", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 9, ExitCode: 137}}
		}, []any{"1/2", "Signal:9", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"completed sidecar still running", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
			p.Status.Conditions = nil
		}, []any{"1/2", "NotReady", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"init container waiting", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate"}, {Name: "seed"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, PodIPs: p.Status.PodIPs, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "migrate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
				{Name: "seed", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		}, []any{"0/2", "Init:1/2", "1", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"init container failed", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "migrate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}
		}, []any{"0/2", "Init:ExitCode:3", "0", "<none>", "node-1", "<none>", "<none>"}},
		{"sidecar counted", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: &started, RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}, []any{"3/3", "Running", "3 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"readiness gates", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/lb", Status: corev1.ConditionTrue},
				corev1.PodCondition{Type: "example.com/dns", Status: corev1.ConditionFalse})
		}, []any{"2/2", "Running", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "1/2"}},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now },
			[]any{"2/2", "Terminating", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"node lost", func(p *corev1.Pod) { p.DeletionTimestamp, p.Status.Reason = &now, nodeLostReason },
			[]any{"2/2", "Unknown", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
		{"succeeded and deleted", func(p *corev1.Pod) {
			p.DeletionTimestamp, p.Status.Phase, p.Status.Conditions = &now, corev1.PodSucceeded, nil
			for i := range p.Status.ContainerStatuses {
				p.Status.ContainerStatuses[i].Ready = false
				p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
			}
		}, []any{"0/2", "Completed", "2 (25m ago)", "10.244.0.7", "node-1", "<none>", "<none>"}},
	}
	for _, c := range cases {
		p := running()
		c.edit(p)
		if got := podRow(p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
	}
}
