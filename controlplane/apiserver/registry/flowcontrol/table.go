package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// flowSchemaTable is upstream's `kubectl get flowschemas`: NAME, PRIORITYLEVEL, MATCHINGPRECEDENCE,
// DISTINGUISHERMETHOD, AGE, MISSINGPL (the Dangling condition's status, Unknown before the config
// controller has written it).
var flowSchemaTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("PriorityLevel", "spec.priorityLevelConfiguration.name"),
		store.Column("MatchingPrecedence", "spec.matchingPrecedence"),
		store.Column("DistinguisherMethod", "spec.distinguisherMethod.type, or <none>"),
	},
	AfterAge: []metav1.TableColumnDefinition{store.Column("MissingPL", "whether the priority level is missing (the Dangling condition)")},
	Cells: func(o runtime.Object) []any {
		fs := o.(*flowcontrolv1.FlowSchema)
		method := "<none>"
		if fs.Spec.DistinguisherMethod != nil {
			method = string(fs.Spec.DistinguisherMethod.Type)
		}
		missing := "Unknown"
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				missing = string(c.Status)
			}
		}
		return []any{fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method, missing}
	},
}

// priorityLevelTable is upstream's `kubectl get prioritylevelconfigurations`: NAME, TYPE,
// NOMINALCONCURRENCYSHARES, QUEUES, HANDSIZE, QUEUELENGTHLIMIT, AGE (<none> where the type has none).
var priorityLevelTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Type", "spec.type"),
		store.Column("NominalConcurrencyShares", "spec.limited.nominalConcurrencyShares"),
		store.Column("Queues", "spec.limited.limitResponse.queuing.queues"),
		store.Column("HandSize", "spec.limited.limitResponse.queuing.handSize"),
		store.Column("QueueLengthLimit", "spec.limited.limitResponse.queuing.queueLengthLimit"),
	},
	Cells: func(o runtime.Object) []any {
		pl := o.(*flowcontrolv1.PriorityLevelConfiguration)
		cells := []any{string(pl.Spec.Type), "<none>", "<none>", "<none>", "<none>"}
		if l := pl.Spec.Limited; l != nil {
			if l.NominalConcurrencyShares != nil {
				cells[1] = int64(*l.NominalConcurrencyShares)
			}
			if q := l.LimitResponse.Queuing; q != nil {
				cells[2], cells[3], cells[4] = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
			}
		}
		return cells
	},
}
