package defaults

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// registerFlowcontrol adds kube-apiserver's flowcontrol.apiserver.k8s.io/v1 defaults: a FlowSchema's
// matchingPrecedence 1000; an exempt level's nominalConcurrencyShares and lendablePercent 0; a limited
// level's nominalConcurrencyShares 30 and lendablePercent 0, its queuing 64 queues, handSize 8,
// queueLengthLimit 50.
func registerFlowcontrol(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&flowcontrolv1.FlowSchema{}, func(o any) { FlowSchema(o.(*flowcontrolv1.FlowSchema)) })
	s.AddTypeDefaultingFunc(&flowcontrolv1.PriorityLevelConfiguration{}, func(o any) {
		PriorityLevelConfiguration(o.(*flowcontrolv1.PriorityLevelConfiguration))
	})
}

// FlowSchema sets a FlowSchema's defaults.
func FlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

// PriorityLevelConfiguration sets a PriorityLevelConfiguration's defaults.
func PriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	zeroIfNil := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		zeroIfNil(&e.NominalConcurrencyShares, 0)
		zeroIfNil(&e.LendablePercent, 0)
	}
	if l := pl.Spec.Limited; l != nil {
		zeroIfNil(&l.NominalConcurrencyShares, 30)
		zeroIfNil(&l.LendablePercent, 0)
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
}
