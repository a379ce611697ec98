// Package events gives a controller an event recorder that posts core/v1 Events to the API server
// (client-go's record package, as kube-controller-manager's controllers use it), reported as
// source.component=<component>.
package events

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Recorder records events; they reach the API server while Start's context is live (events recorded
// before Start or after it ends are dropped).
type Recorder struct {
	record.EventRecorder
	broadcaster record.EventBroadcaster
	client      kubernetes.Interface
}

// New returns a recorder for component (e.g. "daemonset-controller") over client.
func New(client kubernetes.Interface, component string) *Recorder {
	b := record.NewBroadcaster()
	return &Recorder{EventRecorder: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component}), broadcaster: b, client: client}
}

// Start posts recorded events to the API server until ctx is done, then shuts the broadcaster down.
func (r *Recorder) Start(ctx context.Context) {
	r.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.client.CoreV1().Events("")})
	go func() { <-ctx.Done(); r.broadcaster.Shutdown() }()
}
