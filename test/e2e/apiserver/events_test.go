package apiserver_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestEventsK8sIO: an event a node posts to events.k8s.io/v1 (as kube-proxy's recorder does) is the same
// object as the core/v1 event, both ways, through get, list, watch and patch.
func TestEventsK8sIO(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	w, err := c.EventsV1().Events("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch events.k8s.io events: %v", err)
	}
	t.Cleanup(w.Stop)
	node := s.NodeClient(t, "ev-node")
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev-node.start", Namespace: "default"}, EventTime: now,
		ReportingController: "kube-proxy", ReportingInstance: "kube-proxy-ev-node", Action: "StartKubeProxy", Reason: "Starting",
		Regarding: corev1.ObjectReference{Kind: "Node", Name: "ev-node", APIVersion: "v1"}, Note: "proxy started", Type: corev1.EventTypeNormal}
	if _, err := node.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node posts an events.k8s.io event: %v", err)
	}
	ce, err := c.CoreV1().Events("default").Get(ctx, "ev-node.start", metav1.GetOptions{})
	if err != nil || ce.Message != "proxy started" || ce.InvolvedObject.Name != "ev-node" || ce.ReportingController != "kube-proxy" || !ce.EventTime.Equal(&now) {
		t.Fatalf("core/v1 view of the event: %v %+v", err, ce)
	}
	l, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=Starting"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("core field selector over the event: %v %v", err, l)
	}
	// events.k8s.io's own field names, mapped onto the core fields as kube-apiserver does.
	el, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reportingController=kube-proxy,regarding.kind=Node,regarding.name=ev-node,type=Normal"})
	if err != nil || len(el.Items) != 1 || el.Items[0].Name != "ev-node.start" {
		t.Fatalf("events.k8s.io field selector over the event: %v %v", err, el)
	}
	if el, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reportingController=someone-else"}); err != nil || len(el.Items) != 0 {
		t.Fatalf("events.k8s.io field selector matching nothing: %v %v", err, el)
	}
	if _, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"}); err == nil {
		t.Fatal("events.k8s.io accepted the core field name involvedObject.kind")
	}
	select {
	case e := <-w.ResultChan():
		got, ok := e.Object.(*eventsv1.Event)
		if e.Type != watch.Added || !ok || got.Note != "proxy started" || got.Regarding.Kind != "Node" {
			t.Fatalf("events.k8s.io watch: %s %#v", e.Type, e.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("events.k8s.io watch delivered nothing")
	}
	patch := []byte(`{"series":{"count":2,"lastObservedTime":"` + now.Format(metav1.RFC3339Micro) + `"}}`)
	p, err := node.EventsV1().Events("default").Patch(ctx, "ev-node.start", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil || p.Series == nil || p.Series.Count != 2 || p.Note != "proxy started" {
		t.Fatalf("node patches the event's series: %v %+v", err, p)
	}
	if ce, err := c.CoreV1().Events("default").Get(ctx, "ev-node.start", metav1.GetOptions{}); err != nil || ce.Series == nil || ce.Series.Count != 2 {
		t.Fatalf("core/v1 view of the series: %v %+v", err, ce)
	}
	// The other way: a core event read through events.k8s.io.
	if _, err := c.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "core.ev"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, Reason: "Pulled", Message: "pulled", Count: 3}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	el, err = c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=core.ev"})
	if err != nil || len(el.Items) != 1 || el.Items[0].Note != "pulled" || el.Items[0].DeprecatedCount != 3 || el.Items[0].Regarding.Kind != "Pod" {
		t.Fatalf("events.k8s.io view of a core event: %v %+v", err, el)
	}
	if err := c.EventsV1().Events("default").Delete(ctx, "core.ev", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete through events.k8s.io: %v", err)
	}
	if l, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=core.ev"}); err != nil || len(l.Items) != 0 {
		t.Fatalf("deleted event still listed: %v %v", err, l)
	}
}
