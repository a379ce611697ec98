package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConversionRoundTrip: every events.k8s.io/v1 field survives ToCore then FromCore, and lands on the
// core field Kubernetes maps it to.
func TestConversionRoundTrip(t *testing.T) {
	now := metav1.NewMicroTime(time.Unix(1700000000, 123000))
	ts := metav1.NewTime(time.Unix(1700000001, 0))
	e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n.1", Namespace: "default", ResourceVersion: "7"},
		EventTime: now, Series: &eventsv1.EventSeries{Count: 4, LastObservedTime: now},
		ReportingController: "kube-proxy", ReportingInstance: "kube-proxy-n", Action: "StartKubeProxy", Reason: "Starting",
		Regarding: corev1.ObjectReference{Kind: "Node", Name: "n"}, Related: &corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Note: "note", Type: corev1.EventTypeWarning, DeprecatedSource: corev1.EventSource{Component: "c", Host: "h"},
		DeprecatedFirstTimestamp: ts, DeprecatedLastTimestamp: ts, DeprecatedCount: 5}
	c := ToCore(e)
	if c.Message != "note" || c.InvolvedObject.Name != "n" || c.Source.Host != "h" || c.Count != 5 || c.Series.Count != 4 ||
		!c.FirstTimestamp.Equal(&ts) || c.Related.Name != "p" || c.ResourceVersion != "7" {
		t.Fatalf("ToCore: %+v", c)
	}
	if back := FromCore(c); !apiequality.Semantic.DeepEqual(back, e) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, e)
	}
	if FromCore(&corev1.Event{}).Series != nil {
		t.Fatal("no series must stay nil")
	}
}
