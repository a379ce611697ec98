package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/proxystatus"
)

// DefaultProxyTimeout bounds the fetch of every node's proxy status through the kubelet API.
const DefaultProxyTimeout = 2 * time.Second

// NodeProxy is what one node's kubelet API said about its service proxy: Status, or why there is none
// (NotServed: the node answers 404, as an upstream kubelet does; Err: it could not be asked).
type NodeProxy struct {
	Node      string
	Ready     bool // the Node's Ready condition is True
	Status    *proxystatus.Status
	NotServed bool
	Err       string
}

// nodeProxies asks every node's kubelet API (through the API server's nodes/proxy) for its proxy status,
// all at once and within ProxyTimeout; a negative ProxyTimeout asks none.
func (e *Explainer) nodeProxies(ctx context.Context) ([]NodeProxy, error) {
	timeout := e.ProxyTimeout
	if timeout == 0 {
		timeout = DefaultProxyTimeout
	}
	if timeout < 0 {
		return nil, nil
	}
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, nil // a user who may not list nodes gets the rest of the explanation
		}
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]NodeProxy, len(nodes.Items))
	var wg sync.WaitGroup
	for i, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				ready = c.Status == v1.ConditionTrue
			}
		}
		out[i] = NodeProxy{Node: n.Name, Ready: ready}
		wg.Add(1)
		go func(np *NodeProxy) {
			defer wg.Done()
			b, err := e.Client.CoreV1().RESTClient().Get().Resource("nodes").Name(np.Node).SubResource("proxy").
				Suffix(proxystatus.Path).DoRaw(ctx)
			switch {
			case apierrors.IsNotFound(err):
				np.NotServed = true
			case err != nil:
				np.Err = err.Error()
			default:
				var st proxystatus.Status
				if err := json.Unmarshal(b, &st); err != nil {
					np.Err = "bad proxy status: " + err.Error()
				} else {
					np.Status = &st
				}
			}
		}(&out[i])
	}
	wg.Wait()
	return out, nil
}

// changedAt is the latest time the API recorded a write of the object: its newest managedFields entry,
// else its creation. Zero when neither is known.
func changedAt(m metav1.ObjectMeta) time.Time {
	t := m.CreationTimestamp.Time
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// behind reports whether the proxy's resourceVersion programmed is not the API's current one. The
// status is fetched after the objects, so a proxy may already have a newer write: resourceVersions are
// opaque, but where both are etcd revisions (decimal, as every etcd-backed API server makes them) a
// higher programmed one is newer and counts as caught up.
func behind(programmed, current string) bool {
	if programmed == current {
		return false
	}
	p, err1 := strconv.ParseUint(programmed, 10, 64)
	c, err2 := strconv.ParseUint(current, 10, 64)
	return err1 != nil || err2 != nil || p < c
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format("15:04:05")
}

// proxyLag says what node np's proxy has not programmed of the Service (its object at the current
// resourceVersion and each of its EndpointSlices), or "" when it has programmed all of it. checked is
// false when np carries no status to compare with (no nodekit proxy, or the node could not be asked).
func proxyLag(f ServiceFacts, np NodeProxy) (lag string, checked bool) {
	st := np.Status
	if st == nil || st.Disabled {
		return "", false
	}
	s := f.Service
	name := s.Namespace + "/" + s.Name
	last := clock(st.LastSync)
	failing := ""
	if st.LastError != "" {
		failing = fmt.Sprintf("; its last sync failed at %s: %s", clock(st.LastErrorTime), st.LastError)
	}
	if st.LastSync.IsZero() {
		return "has not synced yet" + failing, true
	}
	ps := st.Find(s.Namespace, s.Name)
	if ps == nil {
		return fmt.Sprintf("has not programmed Service %s (last sync %s, Service changed %s)%s", name, last, clock(changedAt(s.ObjectMeta)), failing), true
	}
	if behind(ps.ResourceVersion, s.ResourceVersion) {
		return fmt.Sprintf("has not programmed Service %s at resourceVersion %s, only %s (last sync %s, Service changed %s)%s",
			name, s.ResourceVersion, ps.ResourceVersion, last, clock(changedAt(s.ObjectMeta)), failing), true
	}
	var lags []string
	seen := map[string]bool{}
	for _, sl := range f.Slices {
		seen[sl.Name] = true
		if _, headless := sl.Labels[v1.IsHeadlessService]; headless {
			continue
		}
		rv, ok := ps.EndpointSlices[sl.Name]
		switch {
		case !ok:
			lags = append(lags, fmt.Sprintf("slice %s (created %s)", sl.Name, clock(sl.CreationTimestamp.Time)))
		case behind(rv, sl.ResourceVersion):
			lags = append(lags, fmt.Sprintf("slice %s at resourceVersion %s, only %s (slice changed %s)", sl.Name, sl.ResourceVersion, rv, clock(changedAt(sl.ObjectMeta))))
		}
	}
	var gone []string
	for n := range ps.EndpointSlices {
		if !seen[n] {
			gone = append(gone, n)
		}
	}
	sort.Strings(gone)
	for _, n := range gone {
		lags = append(lags, "the deletion of slice "+n)
	}
	if len(lags) > 0 {
		return fmt.Sprintf("has not programmed Service %s: %s (last sync %s)%s", name, strings.Join(lags, ", "), last, failing), true
	}
	if len(ps.Problems) > 0 {
		return fmt.Sprintf("skipped ports of Service %s: %s", name, strings.Join(ps.Problems, "; ")), true
	}
	return "", true
}

// proxySteps is one step per node: programmed, lagging, or why it could not be checked.
func proxySteps(f ServiceFacts) []Step {
	name := f.Service.Namespace + "/" + f.Service.Name
	var steps []Step
	for _, np := range f.Proxies {
		st := Step{Component: ComponentProxy, Step: "node " + np.Node}
		lag, checked := proxyLag(f, np)
		switch {
		case np.Status != nil && np.Status.Disabled:
			st.OK, st.Detail = true, "runs no nodekit proxy (--disable-proxy): not checked"
		case np.NotServed:
			st.OK, st.Detail = true, "serves no proxy status (not a nodekit agent): not checked"
		case np.Status == nil:
			st.Detail = "proxy status unreachable: " + np.Err
		case checked && lag == "":
			st.Time, st.OK = np.Status.LastSync, true
			st.Detail = fmt.Sprintf("programmed %s (resourceVersion %s, %d slices; %s mode, last sync %s)", name, f.Service.ResourceVersion,
				len(np.Status.Find(f.Service.Namespace, f.Service.Name).EndpointSlices), np.Status.Mode, clock(np.Status.LastSync))
		default:
			st.Time, st.Detail = np.Status.LastSync, lag
		}
		if !np.Ready {
			st.Detail = "node NotReady (left to nodekit explain node); " + st.Detail
		}
		steps = append(steps, st)
	}
	return steps
}

// proxyVerdict is the first Ready node whose proxy has not programmed the Service, as a stuck verdict;
// ok is false when every node that can be checked has programmed it.
func proxyVerdict(f ServiceFacts) (Verdict, bool) {
	for _, np := range f.Proxies {
		if !np.Ready {
			continue // a NotReady node's proxy is the node's problem (nodekit explain node)
		}
		if lag, checked := proxyLag(f, np); checked && lag != "" {
			return Verdict{Stuck: true, Step: "ProxyNotProgrammed", Message: fmt.Sprintf("node %s's proxy %s", np.Node, lag),
				Fix: fmt.Sprintf("connections to the Service from node %s do not reach the current endpoints; check that node's agent log (component=proxy) for sync errors; it catches up within its --min-sync-period once it syncs", np.Node)}, true
		}
	}
	return Verdict{}, false
}
