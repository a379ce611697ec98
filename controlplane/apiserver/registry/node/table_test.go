package node

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store/storetest"
)

// TestTable: kubectl's node columns (VERSION after AGE, the wide ones priority 1) and the cells of a
// registered control-plane node.
func TestTable(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: metav1.NewTime(time.Now().Add(-49 * time.Hour)),
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "",
				"kubernetes.io/role": "worker", "kubernetes.io/hostname": "node-1"}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"},
				{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.11"}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.32.0", OSImage: "Debian GNU/Linux 12 (bookworm)",
				KernelVersion: "6.1.0-26-amd64", ContainerRuntimeVersion: "containerd://1.6.20"},
		},
	}
	columns, wide, cells := storetest.Row(t, table, n)
	if columns != "Name|Status|Roles|Age|Version" || wide != "Internal-IP|External-IP|OS-Image|Kernel-Version|Container-Runtime" {
		t.Fatalf("columns %s, wide %s", columns, wide)
	}
	want := []any{"node-1", "Ready", "control-plane,worker", "2d1h", "v1.32.0", "192.168.1.10", "<none>",
		"Debian GNU/Linux 12 (bookworm)", "6.1.0-26-amd64", "containerd://1.6.20"}
	if !reflect.DeepEqual(cells, want) {
		t.Fatalf("cells %#v, want %#v", cells, want)
	}
}

// TestStatusAndRoles: any Ready status but True is NotReady (Unknown included), a node without the
// condition is Unknown, a cordoned node adds SchedulingDisabled; no role label is <none>.
func TestStatusAndRoles(t *testing.T) {
	cases := []struct {
		ready         corev1.ConditionStatus // "" = no Ready condition
		unschedulable bool
		want          string
	}{
		{corev1.ConditionTrue, false, "Ready"},
		{corev1.ConditionFalse, false, "NotReady"},
		{corev1.ConditionUnknown, false, "NotReady"},
		{corev1.ConditionUnknown, true, "NotReady,SchedulingDisabled"},
		{corev1.ConditionTrue, true, "Ready,SchedulingDisabled"},
		{"", false, "Unknown"},
	}
	for _, c := range cases {
		n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: c.unschedulable}}
		if c.ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: c.ready}}
		}
		row := nodeRow(n)
		if row[0] != c.want {
			t.Errorf("Ready=%q unschedulable=%v: status %q, want %q", c.ready, c.unschedulable, row[0], c.want)
		}
		if want := []any{"<none>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}; !reflect.DeepEqual(row[1:], want) {
			t.Errorf("empty node cells %#v, want %#v", row[1:], want)
		}
	}
}
