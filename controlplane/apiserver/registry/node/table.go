package node

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

const (
	// roleLabelPrefix marks a role by the label key: node-role.kubernetes.io/<role>.
	roleLabelPrefix = "node-role.kubernetes.io/"
	// roleLabel is the older kubernetes.io/role=<role> label.
	roleLabel = "kubernetes.io/role"
)

// table renders kubectl's node table: NAME STATUS ROLES AGE VERSION, and with -o wide INTERNAL-IP
// EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME (see nodeRow).
var table = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Status", "the Ready condition, and SchedulingDisabled when cordoned"),
		store.Column("Roles", "the node-role.kubernetes.io/<role> labels"),
	},
	AfterAge: []metav1.TableColumnDefinition{
		store.Column("Version", "kubelet version"),
		store.Wide("Internal-IP", "the first InternalIP address"),
		store.Wide("External-IP", "the first ExternalIP address"),
		store.Wide("OS-Image", "OS image reported by the kubelet"),
		store.Wide("Kernel-Version", "kernel version reported by the kubelet"),
		store.Wide("Container-Runtime", "container runtime name and version"),
	},
	Cells: func(o runtime.Object) []any { return nodeRow(o.(*corev1.Node)) },
}

// nodeRow is a node's cells after NAME: STATUS ("Ready" when the Ready condition is True, "NotReady" for
// any other status, "Unknown" without the condition; ",SchedulingDisabled" appended when
// spec.unschedulable), ROLES (sorted, comma-separated, "<none>"), VERSION, then INTERNAL-IP and
// EXTERNAL-IP ("<none>") and OS-IMAGE, KERNEL-VERSION, CONTAINER-RUNTIME ("<unknown>" when unreported),
// as kubectl prints them.
func nodeRow(n *corev1.Node) []any {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = "NotReady"
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	info := n.Status.NodeInfo
	return []any{status, store.OrNone(strings.Join(roles(n.Labels), ",")), info.KubeletVersion,
		address(n, corev1.NodeInternalIP), address(n, corev1.NodeExternalIP),
		orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}
}

// roles are the node's roles, sorted and unique: <role> of each node-role.kubernetes.io/<role> label and
// the value of kubernetes.io/role.
func roles(labels map[string]string) []string {
	var out []string
	for k, v := range labels {
		if role, ok := strings.CutPrefix(k, roleLabelPrefix); ok && role != "" {
			out = append(out, role)
		} else if k == roleLabel && v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// address is the node's first address of type t, or "<none>".
func address(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
