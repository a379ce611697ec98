package explain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

func readyNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: at(-600)}}}}
}

// basePod is pod "web" bound to n1, with container "app" in the given state.
func basePod(state v1.ContainerState) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", ResourceVersion: "42", CreationTimestamp: at(0), Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "nodekit.local/x:v9"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, PodIP: "10.244.1.5", Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: at(1)},
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: at(2)}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: state}}},
	}
}

func event(reason, typ, container, msg string, sec int) v1.Event {
	io := v1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: "u1"}
	if container != "" {
		io.FieldPath = "spec.containers{" + container + "}"
	}
	return v1.Event{InvolvedObject: io, Reason: reason, Type: typ, Message: msg, Source: v1.EventSource{Component: "kubelet"},
		FirstTimestamp: at(sec), LastTimestamp: at(sec), Count: 1}
}

func waiting(reason, msg string) v1.ContainerState {
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func setReady(p *v1.Pod) {
	p.Status.Phase = v1.PodRunning
	p.Status.ContainerStatuses[0].Ready = true
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].Status = v1.ConditionTrue
	}
}

func TestPodVerdict(t *testing.T) {
	now := t0.Add(5 * time.Minute)
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(5)}}
	cases := []struct {
		name      string
		facts     func() PodFacts
		stuck     bool
		step      string
		substring []string
	}{
		{"healthy", func() PodFacts {
			p := basePod(running)
			setReady(p)
			return PodFacts{Pod: p, Node: readyNode("n1")}
		}, false, "Running", []string{"Running and Ready on node n1, pod IP 10.244.1.5"}},
		{"unschedulable", func() PodFacts {
			p := basePod(v1.ContainerState{})
			p.Spec.NodeName, p.Status.ContainerStatuses = "", nil
			msg := "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
			e := event("FailedScheduling", v1.EventTypeWarning, "", msg, 1)
			e.Source.Component = "default-scheduler"
			return PodFacts{Pod: p, Events: []v1.Event{e}}
		}, true, "Pending", []string{"no node fits: 0/2 nodes are available: 2 node(s) didn't match", "nodeSelector"}},
		{"anti-affinity", func() PodFacts {
			p := basePod(v1.ContainerState{})
			p.Spec.NodeName, p.Status.ContainerStatuses = "", nil
			msg := "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
			return PodFacts{Pod: p}
		}, true, "Pending", []string{"no node fits: 0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.", "relax the pod's required podAntiAffinity"}},
		{"bad image", func() PodFacts {
			p := basePod(waiting("ImagePullBackOff", `Back-off pulling image "nodekit.local/x:v9"`))
			return PodFacts{Pod: p, Node: readyNode("n1"), Events: []v1.Event{
				event("Pulling", v1.EventTypeNormal, "app", `Pulling image "nodekit.local/x:v9"`, 3),
				event("Failed", v1.EventTypeWarning, "app", `Failed to pull image "nodekit.local/x:v9": nodekit.local/x:v9: not found`, 4)}}
		}, true, "ImagePullBackOff", []string{"image nodekit.local/x:v9 not found"}},
		{"crash loop", func() PodFacts {
			p := basePod(waiting("CrashLoopBackOff", "back-off 40s restarting failed container=app"))
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses[0].RestartCount = 4
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", FinishedAt: at(100)}
			return PodFacts{Pod: p, Node: readyNode("n1"), Logs: map[string]string{"app": "starting\nconfig missing: DB_URL"}}
		}, true, "CrashLoopBackOff", []string{"container app exits with code 3 (restarted 4 times)", "last log line: config missing: DB_URL"}},
		{"failing readiness", func() PodFacts {
			p := basePod(running)
			p.Status.Phase = v1.PodRunning
			return PodFacts{Pod: p, Node: readyNode("n1"), Events: []v1.Event{
				event("Unhealthy", v1.EventTypeWarning, "app", "Readiness probe failed: HTTP probe failed with statuscode: 503", 30)}}
		}, true, "Running but not Ready", []string{"readiness probe failed: HTTP probe failed with statuscode: 503 since " + at(2).Format(time.TimeOnly)}},
		{"failing liveness", func() PodFacts {
			p := basePod(running)
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses[0].RestartCount = 2
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}
			return PodFacts{Pod: p, Node: readyNode("n1"), Events: []v1.Event{
				event("Unhealthy", v1.EventTypeWarning, "app", "Liveness probe failed: HTTP probe failed with statuscode: 503", 30),
				event("Killing", v1.EventTypeNormal, "app", "Container app failed liveness probe, will be restarted", 31)}}
		}, true, "Running but restarting", []string{"restarted 2 times by its liveness probe: Liveness probe failed: HTTP probe failed with statuscode: 503"}},
		{"missing configmap", func() PodFacts {
			p := basePod(waiting("CreateContainerConfigError", `configmap "settings" not found`))
			return PodFacts{Pod: p, Node: readyNode("n1")}
		}, true, "CreateContainerConfigError", []string{`container app: configmap "settings" not found`}},
		{"cni failure", func() PodFacts {
			p := basePod(waiting("ContainerCreating", ""))
			p.Spec.NodeName = "n2"
			msg := "Failed to create pod sandbox: rpc error: plugin type=\"nodekit\" failed (add): no IP addresses available in range 10.244.2.0/24"
			return PodFacts{Pod: p, Node: readyNode("n2"), Events: []v1.Event{event("FailedCreatePodSandBox", v1.EventTypeWarning, "", msg, 3)}}
		}, true, "ContainerCreating", []string{"CNI ADD failed on node n2: no IP addresses available in range 10.244.2.0/24"}},
		{"sandbox failure outside CNI", func() PodFacts {
			p := basePod(waiting("ContainerCreating", ""))
			p.Spec.NodeName = "n2"
			msg := "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"gvisor\" is configured"
			return PodFacts{Pod: p, Node: readyNode("n2"), Events: []v1.Event{event("FailedCreatePodSandBox", v1.EventTypeWarning, "", msg, 3)}}
		}, true, "ContainerCreating", []string{`sandbox failed on node n2: Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "gvisor"`}},
		{"node not ready", func() PodFacts {
			p := basePod(running)
			setReady(p)
			n := readyNode("n1")
			n.Status.Conditions[0] = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down"}
			return PodFacts{Pod: p, Node: n}
		}, true, "NotReady", []string{"node n1 NotReady: KubeletNotReady: container runtime is down"}},
		{"terminating on finalizer", func() PodFacts {
			p := basePod(v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}})
			g := int64(30)
			dt := at(30) // requested at t0 (30 s grace), now is t0+5m
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Finalizers = &dt, &g, []string{"example.com/block"}
			return PodFacts{Pod: p, Node: readyNode("n1")}
		}, true, "Terminating", []string{"Terminating for 5m0s: finalizers [example.com/block] not removed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.facts()
			f.Now = now
			v := PodVerdict(f)
			if v.Stuck != c.stuck || v.Step != c.step {
				t.Fatalf("verdict %+v, want stuck=%v step %q", v, c.stuck, c.step)
			}
			for _, s := range c.substring {
				if !strings.Contains(v.Message+" | "+v.Fix, s) {
					t.Errorf("verdict %q / fix %q lacks %q", v.Message, v.Fix, s)
				}
			}
			if c.stuck && v.Fix == "" {
				t.Errorf("stuck verdict without a fix: %+v", v)
			}
			steps := PodTimeline(f)
			if steps[0].Step != "created" || !strings.Contains(steps[0].Detail, "resourceVersion=42") {
				t.Errorf("first step %+v, want the API write", steps[0])
			}
			for i := 1; i < len(steps); i++ {
				if !steps[i].Time.IsZero() && (steps[i-1].Time.IsZero() || steps[i].Time.Before(steps[i-1].Time)) {
					t.Errorf("steps out of order: %+v then %+v", steps[i-1], steps[i])
				}
			}
		})
	}
}

func TestServiceVerdict(t *testing.T) {
	yes, no := true, false
	pod := basePod(v1.ContainerState{Running: &v1.ContainerStateRunning{}})
	setReady(pod)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "wbe"}}}
	v := ServiceVerdict(ServiceFacts{Service: svc, Pods: []v1.Pod{*pod}, Now: t0})
	if !v.Stuck || v.Message != "Service has 0 ready endpoints: selector app=wbe matches no pod" || !strings.Contains(v.Fix, "pods here carry app=web") {
		t.Fatalf("selector typo: %+v", v)
	}

	svc.Spec.Selector["app"] = "web"
	slice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abc"}, Endpoints: []discoveryv1.Endpoint{{
		Addresses: []string{"10.244.1.5"}, TargetRef: &v1.ObjectReference{Name: "web"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no}}}}
	f := ServiceFacts{Service: svc, Pods: []v1.Pod{*pod}, Slices: []discoveryv1.EndpointSlice{slice}, Now: t0}
	if v := ServiceVerdict(f); v.Stuck || v.Message != "Service has 1 ready endpoints" {
		t.Fatalf("healthy service: %+v", v)
	}
	found := false
	for _, s := range ServiceTimeline(f) {
		if s.Step == "endpoint 10.244.1.5" && s.Detail == "pod web ready=true serving=true terminating=false" && s.OK {
			found = true
		}
	}
	if !found {
		t.Errorf("timeline lacks the endpoint with its conditions: %+v", ServiceTimeline(f))
	}

	// The pod goes unready: the Service's verdict carries the pod's.
	f.Slices[0].Endpoints[0].Conditions.Ready = &no
	unready := basePod(v1.ContainerState{Running: &v1.ContainerStateRunning{}})
	unready.Spec.NodeName = "n1"
	f.Pods = []v1.Pod{*unready}
	if v := ServiceVerdict(f); !v.Stuck || !strings.Contains(v.Message, "1 not Ready; pod web: Running but not Ready") {
		t.Fatalf("unready pod: %+v", v)
	}
}

func TestNodeVerdict(t *testing.T) {
	n := readyNode("n1")
	if v := NodeVerdict(NodeFacts{Node: n, Now: t0}); v.Stuck || v.Step != "Ready" {
		t.Fatalf("ready node: %+v", v)
	}
	n.Status.Conditions[0] = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}
	v := NodeVerdict(NodeFacts{Node: n, Now: t0})
	if !v.Stuck || v.Message != "node n1 NotReady: NodeStatusUnknown: Kubelet stopped posting node status." || !strings.Contains(v.Fix, "stopped posting") {
		t.Fatalf("unknown node: %+v", v)
	}
	n = readyNode("n1")
	n.Spec.Unschedulable = true
	if v := NodeVerdict(NodeFacts{Node: n, Now: t0}); !v.Stuck || v.Step != "SchedulingDisabled" {
		t.Fatalf("cordoned node: %+v", v)
	}
}

// TestReportOutput: the JSON document has the documented fields; text has colours only when asked.
func TestReportOutput(t *testing.T) {
	p := basePod(waiting("CreateContainerConfigError", `configmap "settings" not found`))
	f := PodFacts{Pod: p, Node: readyNode("n1"), Now: t0}
	r := &Report{Kind: "Pod", Namespace: "default", Name: "web", Steps: PodTimeline(f), Verdict: PodVerdict(f)}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Steps   []map[string]any `json:"steps"`
		Verdict map[string]any   `json:"verdict"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "component", "step", "detail", "ok"} {
		if _, ok := doc.Steps[0][k]; !ok {
			t.Errorf("step lacks %q: %v", k, doc.Steps[0])
		}
	}
	if doc.Verdict["stuck"] != true || doc.Verdict["step"] != "CreateContainerConfigError" || doc.Verdict["fix"] == "" {
		t.Errorf("verdict %v", doc.Verdict)
	}
	b.Reset()
	r.WriteText(&b, false)
	if strings.Contains(b.String(), "\x1b[") || !strings.Contains(b.String(), "VERDICT: STUCK CreateContainerConfigError: container app: configmap \"settings\" not found") {
		t.Errorf("plain text:\n%s", b.String())
	}
	b.Reset()
	r.WriteText(&b, true)
	if !strings.Contains(b.String(), ansiRed) {
		t.Errorf("colour text has no colour:\n%s", b.String())
	}
}
