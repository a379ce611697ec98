package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// PodVerdict names the step where the pod is stuck, checked in the order a pod travels: deletion
// (finalizers, a kubelet that never confirms), the node it is bound to, scheduling, the pod's phase, each
// container (image pull, config, sandbox, liveness restarts, crash loop), then readiness. A pod that is
// Running and Ready (or Succeeded) is not stuck.
func PodVerdict(f PodFacts) Verdict {
	p := f.Pod
	if p.DeletionTimestamp != nil {
		if v, ok := terminatingVerdict(f); ok {
			return v
		}
	}
	if p.Spec.NodeName == "" {
		return pendingVerdict(f)
	}
	if v, ok := nodeNotReady(p.Spec.NodeName, f.Node, f.NodeNotFound); ok {
		v.Message += fmt.Sprintf(" (pod %s is bound to it)", p.Name)
		return v
	}
	switch p.Status.Phase {
	case v1.PodSucceeded:
		return Verdict{Step: "Succeeded", Message: "all containers exited 0"}
	case v1.PodFailed:
		return Verdict{Stuck: true, Step: "Failed", Message: strings.TrimPrefix(p.Status.Reason+": "+p.Status.Message, ": "),
			Fix: "the pod will not restart (restartPolicy " + string(p.Spec.RestartPolicy) + "): read its containers' exit codes and logs, fix and recreate it"}
	}
	if v, ok := sandboxVerdict(f); ok {
		return v
	}
	for _, cs := range allStatuses(p) {
		if v, ok := containerVerdict(f, cs); ok {
			return v
		}
	}
	if len(allStatuses(p)) == 0 {
		return Verdict{Stuck: true, Step: "ContainerCreating", Message: fmt.Sprintf("kubelet on node %s has not reported any container (pod age %s)", p.Spec.NodeName, age(f.Now, p.CreationTimestamp.Time)),
			Fix: "check that the node's agent (kubelet) runs and reaches the API server"}
	}
	return readinessVerdict(f)
}

// terminatingVerdict: a deletion past its grace period that finalizers or the kubelet hold up.
func terminatingVerdict(f PodFacts) (Verdict, bool) {
	p := f.Pod
	since := age(f.Now, deleteRequested(p))
	if len(p.Finalizers) > 0 {
		return Verdict{Stuck: true, Step: "Terminating", Message: fmt.Sprintf("Terminating for %s: finalizers %v not removed", since, p.Finalizers),
			Fix: "the controller owning the finalizers must remove them; if it is gone: kubectl patch pod " + p.Name + ` --type=merge -p '{"metadata":{"finalizers":null}}'`}, true
	}
	if f.Now.After(p.DeletionTimestamp.Time) && p.Spec.NodeName != "" {
		v := Verdict{Stuck: true, Step: "Terminating", Message: fmt.Sprintf("Terminating for %s: kubelet on node %s has not confirmed the containers stopped", since, p.Spec.NodeName),
			Fix: "check the node's agent; if the node is gone for good: kubectl delete pod " + p.Name + " --force --grace-period=0"}
		if nv, bad := nodeNotReady(p.Spec.NodeName, f.Node, f.NodeNotFound); bad {
			v.Message += "; " + nv.Message
		}
		return v, true
	}
	return Verdict{Step: "Terminating", Message: fmt.Sprintf("Terminating for %s, within its %ds grace period", since, grace(p))}, true
}

// pendingVerdict: an unbound pod, with the scheduler's own message.
func pendingVerdict(f PodFacts) Verdict {
	p := f.Pod
	msg := ""
	if c := podCondition(p, v1.PodScheduled); c != nil && c.Status == v1.ConditionFalse {
		msg = c.Message
	}
	if e := f.lastEvent("FailedScheduling", "", ""); e != nil {
		msg = e.Message
	}
	if msg != "" {
		return Verdict{Stuck: true, Step: "Pending", Message: "no node fits: " + msg, Fix: schedulingFix(msg)}
	}
	sched := p.Spec.SchedulerName
	if sched == "" {
		sched = v1.DefaultSchedulerName
	}
	return Verdict{Stuck: true, Step: "Pending", Message: fmt.Sprintf("not scheduled after %s and no event from scheduler %q", age(f.Now, p.CreationTimestamp.Time), sched),
		Fix: "check that a scheduler named " + sched + " runs (nodekit server runs default-scheduler)"}
}

// schedulingFix maps the scheduler's filter reasons to a remedy.
func schedulingFix(msg string) string {
	var fixes []string
	add := func(substr, fix string) {
		if strings.Contains(msg, substr) {
			fixes = append(fixes, fix)
		}
	}
	add("node(s) didn't match Pod's node affinity/selector", "fix the pod's nodeSelector/affinity or label a node to match (kubectl label node ...)")
	add("Insufficient", "lower the pod's resource requests or add capacity")
	add("untolerated taint", "add a toleration for the taint or remove the taint from the node")
	add("unschedulable", "uncordon the node (kubectl uncordon)")
	add("node(s) didn't have free ports", "free the hostPort or drop it from the pod")
	add("node(s) didn't match pod affinity rules", "start a pod that the required podAffinity selects (in the term's namespaces) or relax the pod's podAffinity")
	add("node(s) didn't match pod anti-affinity rules", "add nodes in another topology domain or relax the pod's required podAntiAffinity (more replicas than domains)")
	add("node(s) didn't satisfy existing pods anti-affinity rules", "a placed pod's required podAntiAffinity repels this pod: change the labels or move that pod")
	add("node(s) didn't match pod topology spread constraints", "add capacity in the emptier topology domains, raise maxSkew or use whenUnsatisfiable: ScheduleAnyway (label every node with the topologyKey)")
	add("no nodes available", "join a node (nodekit agent --token ...)")
	add("were not ready", "bring the NotReady nodes back (nodekit explain node NAME)")
	if len(fixes) == 0 {
		return "make one node pass every filter the message lists"
	}
	return strings.Join(fixes, "; ")
}

// nodeNotReady reports a bound node that is missing (notFound) or not Ready; an unknown node (nil, not
// notFound) is not reported.
func nodeNotReady(name string, n *v1.Node, notFound bool) (Verdict, bool) {
	if notFound {
		return Verdict{Stuck: true, Step: "NotReady", Message: "node " + name + " does not exist",
			Fix: "the node was deleted: delete the pod so its controller recreates it elsewhere"}, true
	}
	if n == nil {
		return Verdict{}, false
	}
	r := nodeCondition(n, v1.NodeReady)
	if r != nil && r.Status == v1.ConditionTrue {
		return Verdict{}, false
	}
	msg := "no Ready condition yet"
	if r != nil {
		msg = strings.TrimSuffix(fmt.Sprintf("%s: %s", r.Reason, r.Message), ": ")
	}
	fix := "check the node's agent: its kubelet, containerd and CNI (journalctl -u nodekit-agent, nodekit crictl info)"
	if r != nil && r.Status == v1.ConditionUnknown {
		fix = "the kubelet stopped posting status: check that the node is up and its agent reaches the API server"
	}
	return Verdict{Stuck: true, Step: "NotReady", Message: fmt.Sprintf("node %s NotReady: %s", name, msg), Fix: fix}, true
}

// cniAddFailed precedes the CNI plugin's own error in a runtime's sandbox error (libcni's wording).
const cniAddFailed = "failed (add): "

// sandboxVerdict: the pod's sandbox (netns, CNI ADD) or its volumes failed and no container runs.
func sandboxVerdict(f PodFacts) (Verdict, bool) {
	for _, cs := range allStatuses(f.Pod) {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return Verdict{}, false
		}
	}
	node := f.Pod.Spec.NodeName
	if e := f.lastEvent("FailedCreatePodSandBox", "", ""); e != nil {
		// containerd (and CRI-O) word a failed CNI ADD "plugin type=... failed (add): <the plugin's error>".
		if _, cniErr, ok := strings.Cut(e.Message, cniAddFailed); ok {
			return Verdict{Stuck: true, Step: "ContainerCreating", Message: fmt.Sprintf("CNI ADD failed on node %s: %s", node, cniErr),
				Fix: "the CNI plugin refused the pod's network: fix what its error names (a full podCIDR: free addresses or give the node a larger podCIDR; the bridge; the plugin's binaries and /etc/cni/net.d)"}, true
		}
		return Verdict{Stuck: true, Step: "ContainerCreating", Message: fmt.Sprintf("sandbox failed on node %s: %s", node, e.Message),
			Fix: "the pod sandbox failed: check the runtime's error, the runtime handler, /etc/cni/net.d on the node and the CNI plugin's error (IP range, bridge, binaries)"}, true
	}
	if e := f.lastEvent("FailedMount", "", ""); e != nil {
		return Verdict{Stuck: true, Step: "ContainerCreating", Message: fmt.Sprintf("volume mount failed on node %s: %s", node, e.Message),
			Fix: "create the ConfigMap/Secret/PVC the volume names, or fix the volume's reference"}, true
	}
	return Verdict{}, false
}

// imagePullReasons are the waiting reasons of a failed image pull.
var imagePullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true}

// containerVerdict: one container waiting on an image, its config, a back-off or a liveness restart.
func containerVerdict(f PodFacts, cs v1.ContainerStatus) (Verdict, bool) {
	w := cs.State.Waiting
	if w != nil && imagePullReasons[w.Reason] {
		msg := w.Message
		if e := f.lastEvent("Failed", cs.Name, "image"); e != nil {
			msg = e.Message
		}
		image := containerImage(f.Pod, cs)
		what := pullFailure(msg)
		return Verdict{Stuck: true, Step: w.Reason, Message: fmt.Sprintf("image %s %s: %s", image, what, msg),
			Fix: "fix the image name or tag (crictl images / the registry's tags), or import it on the node; check imagePullSecrets for a private registry"}, true
	}
	if w != nil && (w.Reason == "CreateContainerConfigError" || w.Reason == "CreateContainerError" || w.Reason == "RunContainerError") {
		return Verdict{Stuck: true, Step: w.Reason, Message: fmt.Sprintf("container %s: %s", cs.Name, w.Message),
			Fix: "create the ConfigMap/Secret it references (env, envFrom, volumes) or fix the reference; the kubelet retries on its own"}, true
	}
	if e := f.lastEvent("Killing", cs.Name, "liveness"); e != nil && cs.RestartCount > 0 {
		probe := f.lastEvent("Unhealthy", cs.Name, "Liveness")
		why := e.Message
		if probe != nil {
			why = probe.Message
		}
		step := "Running but restarting"
		if w != nil {
			step = w.Reason
		}
		return Verdict{Stuck: true, Step: step, Message: fmt.Sprintf("container %s restarted %d times by its liveness probe: %s", cs.Name, cs.RestartCount, why),
			Fix: "fix the application's health endpoint or loosen the liveness probe (initialDelaySeconds, timeoutSeconds, failureThreshold)"}, true
	}
	if w != nil && w.Reason == "CrashLoopBackOff" || cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
		return crashVerdict(f, cs), true
	}
	return Verdict{}, false
}

// pullFailure classifies a pull error: "not found" (no such repository or tag), "registry unreachable"
// (DNS, connection), or "cannot be pulled".
func pullFailure(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "not found") || strings.Contains(m, "manifest unknown"):
		return "not found"
	case strings.Contains(m, "no such host") || strings.Contains(m, "connection refused") || strings.Contains(m, "i/o timeout"):
		return "not on the node and its registry is unreachable"
	}
	return "cannot be pulled"
}

// crashVerdict: a container that keeps exiting, with its last exit code and log line.
func crashVerdict(f PodFacts, cs v1.ContainerStatus) Verdict {
	step := "CrashLoopBackOff"
	if cs.State.Waiting == nil {
		step = "Error"
	}
	t := cs.LastTerminationState.Terminated
	if cs.State.Terminated != nil {
		t = cs.State.Terminated
	}
	msg := fmt.Sprintf("container %s keeps exiting (restarted %d times)", cs.Name, cs.RestartCount)
	fix := "read its logs (kubectl logs --previous " + f.Pod.Name + " -c " + cs.Name + ") and fix the command, arguments or configuration"
	if t != nil {
		msg = fmt.Sprintf("container %s exits with code %d (restarted %d times)", cs.Name, t.ExitCode, cs.RestartCount)
		if t.Reason == "OOMKilled" {
			msg = fmt.Sprintf("container %s was OOMKilled (restarted %d times)", cs.Name, cs.RestartCount)
			fix = "raise the container's memory limit or lower its memory use"
		}
	}
	if last := lastLine(f.Logs[cs.Name]); last != "" {
		msg += "; last log line: " + last
	}
	return Verdict{Stuck: true, Step: step, Message: msg, Fix: fix}
}

// readinessVerdict: every container runs; the pod is Ready, or a readiness probe (or gate) holds it.
func readinessVerdict(f PodFacts) Verdict {
	p := f.Pod
	ready := podCondition(p, v1.PodReady)
	if ready != nil && ready.Status == v1.ConditionTrue {
		return Verdict{Step: "Running", Message: fmt.Sprintf("Running and Ready on node %s, pod IP %s", p.Spec.NodeName, p.Status.PodIP)}
	}
	since := ""
	if ready != nil && !ready.LastTransitionTime.IsZero() {
		since = " since " + ready.LastTransitionTime.Format(time.TimeOnly)
	}
	var names []string
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			names = append(names, cs.Name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if e := f.lastEvent("Unhealthy", n, "Readiness"); e != nil {
			return Verdict{Stuck: true, Step: "Running but not Ready", Message: fmt.Sprintf("readiness probe failed: %s%s", strings.TrimPrefix(e.Message, "Readiness probe failed: "), since),
				Fix: "fix what the readiness probe checks (the app's dependency or endpoint), or the probe's port/path; the pod gets no Service traffic meanwhile"}
		}
	}
	if len(names) == 0 && ready != nil && ready.Reason == "ReadinessGatesNotReady" {
		return Verdict{Stuck: true, Step: "Running but not Ready", Message: ready.Message + since, Fix: "the controller owning the readiness gate must set its condition"}
	}
	return Verdict{Stuck: true, Step: "Running but not Ready", Message: fmt.Sprintf("containers %v not ready yet, no probe failure reported%s", names, since),
		Fix: "wait for the readiness probe's initialDelaySeconds/periodSeconds; check the probe hits the right port"}
}

func containerImage(p *v1.Pod, cs v1.ContainerStatus) string {
	for _, c := range append(append([]v1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == cs.Name {
			return c.Image
		}
	}
	return cs.Image
}

// lastLine is the last non-empty line of a log tail.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// age is now-t rounded to seconds ("5m0s"), "0s" when t is zero or in the future.
func age(now, t time.Time) string {
	if t.IsZero() || now.Before(t) {
		return "0s"
	}
	return now.Sub(t).Round(time.Second).String()
}
