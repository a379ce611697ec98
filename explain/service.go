package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ServiceFacts are the objects a Service's explanation is computed from: the Service (required), the
// pods of its namespace (all of them: the verdict finds the ones the selector matches, and near misses
// for a typo), its EndpointSlices (label kubernetes.io/service-name), what each node's proxy reports
// (Proxies; none for a headless or ExternalName Service, which no proxy programs), and Now.
type ServiceFacts struct {
	Service *v1.Service
	Pods    []v1.Pod
	Slices  []discoveryv1.EndpointSlice
	Proxies []NodeProxy
	Now     time.Time
}

// proxied reports whether node proxies program s (it has a ClusterIP).
func proxied(s *v1.Service) bool {
	return s.Spec.Type != v1.ServiceTypeExternalName && s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// matching returns the pods the Service's selector matches (none for an empty selector).
func (f ServiceFacts) matching() []v1.Pod {
	if len(f.Service.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(f.Service.Spec.Selector)
	var out []v1.Pod
	for _, p := range f.Pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func selectorString(sel map[string]string) string {
	if len(sel) == 0 {
		return "<none>"
	}
	return labels.SelectorFromSet(sel).String()
}

// ServiceTimeline returns the Service's write, its selector and matching pods, and every endpoint of
// its EndpointSlices with its ready/serving/terminating conditions.
func ServiceTimeline(f ServiceFacts) []Step {
	s := f.Service
	steps := []Step{{Time: s.CreationTimestamp.Time, Component: ComponentAPI, Step: "created", OK: true,
		Detail: fmt.Sprintf("type=%s clusterIP=%s ports=%s uid=%s resourceVersion=%s", s.Spec.Type, s.Spec.ClusterIP, portsString(s.Spec.Ports), s.UID, s.ResourceVersion)}}
	match := f.matching()
	steps = append(steps, Step{Time: f.Now, Component: ComponentService, Step: "selector", OK: len(match) > 0 || len(s.Spec.Selector) == 0,
		Detail: fmt.Sprintf("%s matches %d pods", selectorString(s.Spec.Selector), len(match))})
	for _, p := range match {
		ready := podCondition(&p, v1.PodReady)
		ok := ready != nil && ready.Status == v1.ConditionTrue
		steps = append(steps, Step{Time: p.CreationTimestamp.Time, Component: ComponentService, Step: "pod " + p.Name, OK: ok,
			Detail: fmt.Sprintf("phase=%s ready=%v ip=%s node=%s", p.Status.Phase, ok, p.Status.PodIP, p.Spec.NodeName)})
	}
	for _, sl := range f.Slices {
		steps = append(steps, Step{Time: sl.CreationTimestamp.Time, Component: ComponentEndpoints, Step: "slice " + sl.Name, OK: true,
			Detail: fmt.Sprintf("%s, %d endpoints, resourceVersion=%s", sl.AddressType, len(sl.Endpoints), sl.ResourceVersion)})
		for _, ep := range sl.Endpoints {
			target := ""
			if ep.TargetRef != nil {
				target = ep.TargetRef.Name
			}
			steps = append(steps, Step{Component: ComponentEndpoints, Step: "endpoint " + strings.Join(ep.Addresses, ","), OK: isTrue(ep.Conditions.Ready),
				Detail: fmt.Sprintf("pod %s ready=%v serving=%v terminating=%v", target, isTrue(ep.Conditions.Ready), isTrue(ep.Conditions.Serving), isTrue(ep.Conditions.Terminating))})
		}
	}
	steps = append(steps, proxySteps(f)...)
	sortSteps(steps)
	return steps
}

// ServiceVerdict: a Service with a selector is stuck when it has no ready endpoint; the message says
// whether the selector matches no pod (with the namespace's values for the selector's keys, to spot a
// typo), the matching pods are not Ready (with the first one's own verdict), or the EndpointSlices lag.
// A Service with ready endpoints is stuck when a Ready node's proxy has not programmed its current
// object and slices (ProxyNotProgrammed, naming the node, its last sync and when the object changed).
func ServiceVerdict(f ServiceFacts) Verdict {
	s := f.Service
	ready := 0
	for _, sl := range f.Slices {
		for _, ep := range sl.Endpoints {
			if isTrue(ep.Conditions.Ready) {
				ready++
			}
		}
	}
	if s.Spec.Type == v1.ServiceTypeExternalName {
		return Verdict{Step: "ExternalName", Message: "Service aliases " + s.Spec.ExternalName + " (no endpoints)"}
	}
	if ready > 0 {
		if v, stuck := proxyVerdict(f); stuck {
			return v
		}
		return Verdict{Step: "Ready", Message: fmt.Sprintf("Service has %d ready endpoints", ready)}
	}
	if len(s.Spec.Selector) == 0 {
		return Verdict{Stuck: true, Step: "NoEndpoints", Message: "Service has 0 ready endpoints and no selector: its EndpointSlices are managed by hand",
			Fix: "add a selector, or create an EndpointSlice labelled kubernetes.io/service-name=" + s.Name}
	}
	sel := selectorString(s.Spec.Selector)
	match := f.matching()
	if len(match) == 0 {
		return Verdict{Stuck: true, Step: "NoEndpoints", Message: fmt.Sprintf("Service has 0 ready endpoints: selector %s matches no pod", sel),
			Fix: selectorFix(f)}
	}
	var notReady []v1.Pod
	for _, p := range match {
		if c := podCondition(&p, v1.PodReady); c == nil || c.Status != v1.ConditionTrue {
			notReady = append(notReady, p)
		}
	}
	if len(notReady) > 0 {
		pv := PodVerdict(PodFacts{Pod: &notReady[0], Now: f.Now})
		return Verdict{Stuck: true, Step: "NoEndpoints", Message: fmt.Sprintf("Service has 0 ready endpoints: selector %s matches %d pods, %d not Ready; pod %s: %s: %s",
			sel, len(match), len(notReady), notReady[0].Name, pv.Step, pv.Message), Fix: "nodekit explain pod " + notReady[0].Name + ": " + pv.Fix}
	}
	return Verdict{Stuck: true, Step: "NoEndpoints", Message: fmt.Sprintf("Service has 0 ready endpoints although %d Ready pods match %s", len(match), sel),
		Fix: "the EndpointSlice controller has not published them: check the controller manager (nodekit server) runs"}
}

// selectorFix lists, for each selector key, the values pods in the namespace carry.
func selectorFix(f ServiceFacts) string {
	var hints []string
	for _, k := range sortedKeys(f.Service.Spec.Selector) {
		vals := map[string]bool{}
		for _, p := range f.Pods {
			if v, ok := p.Labels[k]; ok {
				vals[v] = true
			}
		}
		if len(vals) > 0 {
			var vs []string
			for v := range vals {
				vs = append(vs, k+"="+v)
			}
			sort.Strings(vs)
			hints = append(hints, "pods here carry "+strings.Join(vs, ", "))
		}
	}
	fix := "fix the Service's selector or the pods' labels (kubectl get pods --show-labels)"
	if len(hints) > 0 {
		fix += "; " + strings.Join(hints, "; ")
	}
	return fix
}

func portsString(ports []v1.ServicePort) string {
	var parts []string
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%d->%s/%s", p.Port, p.TargetPort.String(), p.Protocol))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func isTrue(b *bool) bool { return b != nil && *b }
