// Package explain builds one timeline of a pod's, a node's or a Service's path through the cluster and a
// verdict naming the step where it is stuck, with the most likely fix: `nodekit explain`.
//
// It reads only the Kubernetes API (objects, events, EndpointSlices) and the kubelet API as the API
// server proxies it (pods/log), so it works against any conformant control plane. The verdict functions
// (PodVerdict, NodeVerdict, ServiceVerdict) and the timelines are pure functions over fetched objects
// (PodFacts, NodeFacts, ServiceFacts); Explainer fetches those objects with client-go.
package explain

import (
	"time"
)

// Components name who did a step, as the timeline's component column shows it.
const (
	ComponentAPI       = "api"       // the API server: the object's write
	ComponentScheduler = "scheduler" // default-scheduler's Scheduled/FailedScheduling events
	ComponentKubelet   = "kubelet"   // the kubelet's events and the pod status it writes
	ComponentRuntime   = "runtime"   // the container runtime's view through the kubelet API (logs)
	ComponentStatus    = "status"    // conditions with their lastTransitionTime
	ComponentNode      = "node"      // the node the pod runs on
	ComponentService   = "service"   // a Service's selector and the pods it matches
	ComponentEndpoints = "endpoints" // EndpointSlices and their endpoint conditions
	ComponentProxy     = "proxy"     // each node's service proxy: whether it programmed the Service
)

// Step is one entry of a timeline. Time is when it happened (zero when the source has no time: then
// the step sorts last); Component is one of the Component* names or an event's source component; Step
// is a short name (an event reason, a condition "Ready=False", "created"); Detail is free text; OK is
// false for a warning or a failed step.
type Step struct {
	Time      time.Time `json:"time"`
	Component string    `json:"component"`
	Step      string    `json:"step"`
	Detail    string    `json:"detail"`
	OK        bool      `json:"ok"`
}

// Verdict names where an object is stuck. Stuck is false for a healthy object (Step then names its
// state, e.g. "Running"); Step is the stuck step as kubectl shows it ("Pending", "ImagePullBackOff",
// "CrashLoopBackOff", "Running but not Ready", "Terminating", "NotReady", ...); Message says why, with
// the cluster's own words (the scheduler's or kubelet's message); Fix is the most likely remedy.
type Verdict struct {
	Stuck   bool   `json:"stuck"`
	Step    string `json:"step"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Report is `nodekit explain`'s output (also its `-o json` document): the object, its timeline in time
// order, and the verdict.
type Report struct {
	Kind      string  `json:"kind"` // Pod, Node or Service
	Namespace string  `json:"namespace,omitempty"`
	Name      string  `json:"name"`
	Steps     []Step  `json:"steps"`
	Verdict   Verdict `json:"verdict"`
}
