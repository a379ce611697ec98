package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEvent(t *testing.T) {
	meta := func(ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: "e1", Namespace: ns} }
	now := metav1.NowMicro()
	full := func(ns, involvedNS string) *corev1.Event {
		return &corev1.Event{ObjectMeta: meta(ns), InvolvedObject: corev1.ObjectReference{Namespace: involvedNS}, EventTime: now,
			ReportingController: "example.com/ctl", ReportingInstance: "i", Action: "Do", Reason: "Done"}
	}
	for _, tc := range []struct {
		name string
		e    *corev1.Event
		want string // "" = valid
	}{
		{"core event naming only its namespace (the conformance specs' form)", &corev1.Event{ObjectMeta: meta("ns1"), InvolvedObject: corev1.ObjectReference{Namespace: "ns1"}}, ""},
		{"core event without involvedObject in default", &corev1.Event{ObjectMeta: meta("default")}, ""},
		{"core event without involvedObject.namespace elsewhere", &corev1.Event{ObjectMeta: meta("ns1")}, "involvedObject.namespace: Invalid value: \"\": does not match event.namespace"},
		{"core event about another namespace", &corev1.Event{ObjectMeta: meta("ns1"), InvolvedObject: corev1.ObjectReference{Namespace: "ns2"}}, "does not match event.namespace"},
		{"events.k8s.io event", full("ns1", "ns1"), ""},
		{"events.k8s.io event about a node, in default", full("default", ""), ""},
		{"events.k8s.io event without action", func() *corev1.Event { e := full("ns1", "ns1"); e.Action = ""; return e }(), "action: Required value"},
		{"events.k8s.io event with a bad controller name", func() *corev1.Event { e := full("ns1", "ns1"); e.ReportingController = "a b"; return e }(), "reportingController: Invalid value"},
		{"events.k8s.io event with a long reason", func() *corev1.Event { e := full("ns1", "ns1"); e.Reason = strings.Repeat("r", 129); return e }(), "reason: Invalid value: \"\": can have at most 128 characters"},
	} {
		errs := Event(tc.e)
		got := errs.ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %v, want valid", tc.name, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}
