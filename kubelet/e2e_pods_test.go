package kubelet_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestPodServesHTTP: a pod bound to the node runs; its status reports phase, IPs, conditions and QoS;
// the demo server answers on the pod IP with the pod's identity; events tell the story.
func TestPodServesHTTP(t *testing.T) {
	n := newNode(t, false)
	n.create(n.demoPod("web"))
	p := n.waitPod("web", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	if p.Status.PodIP == "" || len(p.Status.PodIPs) == 0 {
		t.Fatalf("no pod IP in status: %+v", p.Status)
	}
	if p.Status.HostIP != "192.0.2.10" {
		t.Errorf("hostIP = %q, want the node's InternalIP 192.0.2.10", p.Status.HostIP)
	}
	if p.Status.QOSClass != v1.PodQOSBestEffort || p.Status.StartTime == nil {
		t.Errorf("qosClass=%q startTime=%v", p.Status.QOSClass, p.Status.StartTime)
	}
	for _, c := range []v1.PodConditionType{v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if s := condition(p, c); s != v1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", c, s)
		}
	}
	body := containerd.HTTPGet(t, "http://"+p.Status.PodIP+":8080/")
	want := "pod=web namespace=default ip=" + p.Status.PodIP
	if !strings.Contains(body, want) {
		t.Fatalf("pod answered %q, want it to contain %q", body, want)
	}
	cs := containerStatus(p, "demo")
	if cs.RestartCount != 0 || cs.ContainerID == "" || cs.ImageID == "" || cs.Started == nil || !*cs.Started || !cs.Ready {
		t.Errorf("container status %+v", cs)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := n.events("web")
		if slices.Contains(ev, "Pulled") && slices.Contains(ev, "Created") && slices.Contains(ev, "Started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want Pulled, Created, Started", ev)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
