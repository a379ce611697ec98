package explain

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// DefaultLogTimeout bounds the optional fetch of failing containers' log tails through the kubelet API.
const DefaultLogTimeout = 2 * time.Second

// logTailLines and logLimitBytes bound each log tail.
const (
	logTailLines  = 10
	logLimitBytes = 4096
)

// Explainer fetches the objects an explanation needs through the API (and the kubelet API the API
// server proxies, for pods/log and each node's proxy status) and computes the Report. Client is
// required; LogTimeout bounds the log fetches (0 = DefaultLogTimeout, negative = no logs); ProxyTimeout
// the proxy status fetches (0 = DefaultProxyTimeout, negative = none); Now is the clock (nil = time.Now).
type Explainer struct {
	Client       kubernetes.Interface
	LogTimeout   time.Duration
	ProxyTimeout time.Duration
	Now          func() time.Time
}

func (e *Explainer) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// events lists the events of one involved object (kind and name; the field selector narrows the list
// where the API server supports it, and the callers filter again).
func (e *Explainer) events(ctx context.Context, ns, kind, name string) ([]v1.Event, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if apierrors.IsBadRequest(err) {
		list, err = e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("list events of %s %s/%s: %w", kind, ns, name, err)
	}
	var out []v1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out, nil
}

// PodFacts fetches the pod ns/name, its events, its node and (within LogTimeout) the log tails of
// its failing containers. A missing pod is an error naming it; a missing node is left nil.
func (e *Explainer) PodFacts(ctx context.Context, ns, name string) (PodFacts, error) {
	pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return PodFacts{}, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	f := PodFacts{Pod: pod}
	if f.Events, err = e.events(ctx, ns, "Pod", name); err != nil {
		return PodFacts{}, err
	}
	if pod.Spec.NodeName != "" {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			f.Node = n
		case apierrors.IsNotFound(err):
			f.NodeNotFound = true
		default:
			return PodFacts{}, fmt.Errorf("node %s of pod %s/%s: %w", pod.Spec.NodeName, ns, name, err)
		}
	}
	f.Logs = e.failingLogs(ctx, pod)
	f.Now = e.now()
	return f, nil
}

// failingLogs fetches the log tail of each container that exited non-zero or restarted (its previous
// instance), all within LogTimeout; a container whose log cannot be read is left out.
func (e *Explainer) failingLogs(ctx context.Context, pod *v1.Pod) map[string]string {
	timeout := e.LogTimeout
	if timeout == 0 {
		timeout = DefaultLogTimeout
	}
	if timeout < 0 || pod.Spec.NodeName == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logs := map[string]string{}
	for _, cs := range allStatuses(pod) {
		previous := cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0
		current := cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0
		if !previous && !current {
			continue
		}
		tail, limit := int64(logTailLines), int64(logLimitBytes)
		opts := &v1.PodLogOptions{Container: cs.Name, Previous: previous && !current, TailLines: &tail, LimitBytes: &limit}
		rc, err := e.Client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(rc, logLimitBytes))
		rc.Close()
		if s := strings.TrimSpace(string(b)); s != "" {
			logs[cs.Name] = s
		}
	}
	return logs
}

// Pod explains the pod ns/name.
func (e *Explainer) Pod(ctx context.Context, ns, name string) (*Report, error) {
	f, err := e.PodFacts(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &Report{Kind: "Pod", Namespace: ns, Name: name, Steps: PodTimeline(f), Verdict: PodVerdict(f)}, nil
}

// Node explains the node name: its Lease, bound pods and events.
func (e *Explainer) Node(ctx context.Context, name string) (*Report, error) {
	n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	f := NodeFacts{Node: n}
	l, err := e.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		f.Lease = l
	case !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("lease of node %s: %w", name, err)
	}
	pods, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return nil, fmt.Errorf("pods on node %s: %w", name, err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == name {
			f.Pods = append(f.Pods, p)
		}
	}
	if f.Events, err = e.events(ctx, v1.NamespaceDefault, "Node", name); err != nil {
		return nil, err
	}
	f.Now = e.now()
	return &Report{Kind: "Node", Name: name, Steps: NodeTimeline(f), Verdict: NodeVerdict(f)}, nil
}

// Service explains the Service ns/name: its pods, EndpointSlices and whether each node's proxy has
// programmed it.
func (e *Explainer) Service(ctx context.Context, ns, name string) (*Report, error) {
	s, err := e.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("pods of service %s/%s: %w", ns, name, err)
	}
	slices, err := e.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("endpointslices of service %s/%s: %w", ns, name, err)
	}
	f := ServiceFacts{Service: s, Pods: pods.Items, Slices: slices.Items}
	if proxied(s) {
		if f.Proxies, err = e.nodeProxies(ctx); err != nil {
			return nil, fmt.Errorf("proxies of service %s/%s: %w", ns, name, err)
		}
	}
	f.Now = e.now()
	return &Report{Kind: "Service", Namespace: ns, Name: name, Steps: ServiceTimeline(f), Verdict: ServiceVerdict(f)}, nil
}
