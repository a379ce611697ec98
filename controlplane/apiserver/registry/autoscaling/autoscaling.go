// Package autoscaling serves horizontalpodautoscalers (with /status; generation follows spec changes,
// the store's rule for resources with status), stored as autoscaling/v2 objects, with kube-apiserver's
// validation (validation.HorizontalPodAutoscaler), defaults (package defaults) and table columns. The
// same storage serves autoscaling/v1 through the conversions of package conversion. The
// horizontal-pod-autoscaler controller (controlplane/controllers/podautoscaler) acts on them.
package autoscaling

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns "horizontalpodautoscalers" and "horizontalpodautoscalers/status".
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.HorizontalPodAutoscaler(o.(*autoscalingv2.HorizontalPodAutoscaler), nil)
	})
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.HorizontalPodAutoscaler(o.(*autoscalingv2.HorizontalPodAutoscaler), old.(*autoscalingv2.HorizontalPodAutoscaler))
	}
	main, status, err := store.New(getter, store.Spec{
		Resource: autoscalingv2.Resource("horizontalpodautoscalers"), Singular: "horizontalpodautoscaler",
		ShortNames: []string{"hpa"}, Categories: []string{"all"},
		NewFunc:  func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:  func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Strategy: s,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.HorizontalPodAutoscalerStatus(o.(*autoscalingv2.HorizontalPodAutoscaler))
		},
		Table: hpaTable,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"horizontalpodautoscalers": main, "horizontalpodautoscalers/status": status}, nil
}

var hpaTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Reference", "spec.scaleTargetRef: kind/name"),
		store.Column("Targets", "each metric's current value over its target"),
		store.Column("MinPods", "spec.minReplicas"),
		store.Column("MaxPods", "spec.maxReplicas"),
		store.Column("Replicas", "status.currentReplicas"),
	},
	Cells: func(o runtime.Object) []any {
		h := o.(*autoscalingv2.HorizontalPodAutoscaler)
		minPods := "<unset>"
		if h.Spec.MinReplicas != nil {
			minPods = fmt.Sprintf("%d", *h.Spec.MinReplicas)
		}
		return []any{h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name, Targets(h.Spec.Metrics, h.Status.CurrentMetrics),
			minPods, int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas)}
	},
}

// Targets is kube-apiserver's TARGETS cell: "<current>/<target>" per metric in spec order (the status
// entry at the same index, "<unknown>" when none), resources as "cpu: 12%/50%", the first two shown
// then "+ N more...", "<none>" without metrics.
func Targets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	var list []string
	for i, s := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		list = append(list, target(s, st))
	}
	if len(list) > 2 {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:2], ", "), len(list)-2)
	}
	return strings.Join(list, ", ")
}

func target(s autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	current := "<unknown>"
	switch s.Type {
	case autoscalingv2.ExternalMetricSourceType, autoscalingv2.ObjectMetricSourceType:
		var tgt autoscalingv2.MetricTarget
		var cur *autoscalingv2.MetricValueStatus
		if s.Type == autoscalingv2.ObjectMetricSourceType && s.Object != nil {
			tgt = s.Object.Target
			if st != nil && st.Object != nil {
				cur = &st.Object.Current
			}
		} else if s.External != nil {
			tgt = s.External.Target
			if st != nil && st.External != nil {
				cur = &st.External.Current
			}
		}
		if tgt.AverageValue != nil {
			if cur != nil && cur.AverageValue != nil {
				current = cur.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, tgt.AverageValue.String())
		}
		if cur != nil && cur.Value != nil {
			current = cur.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, quantity(tgt.Value))
	case autoscalingv2.PodsMetricSourceType:
		if s.Pods == nil {
			break
		}
		if st != nil && st.Pods != nil && st.Pods.Current.AverageValue != nil {
			current = st.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, quantity(s.Pods.Target.AverageValue))
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		name, tgt := "", autoscalingv2.MetricTarget{}
		var cur *autoscalingv2.MetricValueStatus
		if s.Resource != nil {
			name, tgt = string(s.Resource.Name), s.Resource.Target
			if st != nil && st.Resource != nil {
				cur = &st.Resource.Current
			}
		} else if s.ContainerResource != nil {
			name, tgt = string(s.ContainerResource.Name), s.ContainerResource.Target
			if st != nil && st.ContainerResource != nil {
				cur = &st.ContainerResource.Current
			}
		}
		if tgt.AverageValue != nil {
			if cur != nil && cur.AverageValue != nil {
				current = cur.AverageValue.String()
			}
			return fmt.Sprintf("%s: %s/%s", name, current, tgt.AverageValue.String())
		}
		if cur != nil && cur.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
		}
		target := "<auto>"
		if tgt.AverageUtilization != nil {
			target = fmt.Sprintf("%d%%", *tgt.AverageUtilization)
		}
		return fmt.Sprintf("%s: %s/%s", name, current, target)
	}
	return "<unknown type>"
}

func quantity(q *resource.Quantity) string {
	if q == nil {
		return "<unset>"
	}
	return q.String()
}
