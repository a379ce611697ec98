// Package node_test holds the end-to-end tests of nodekit's node half: the kubelet server over a real
// containerd, and node registration, heartbeats and readiness against a real API server.
package node_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/runtime/containerd"
	ctrfw "github.com/nodekit/nodekit/test/framework/containerd"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// containerdOutage stops rt's containerd (containers keep running under their shims), calls during with
// the stop time, keeps containerd down until down has passed since the stop, then starts a new
// containerd on the same directories and socket and hands it to rt, so the framework's cleanup stops
// it. It returns when the new containerd answers CRI.
func containerdOutage(t *testing.T, rt *ctrfw.Runtime, down time.Duration, during func(stopped time.Time)) (restarted time.Time) {
	t.Helper()
	ctx := context.Background()
	params := rt.Supervisor.Params()
	if err := rt.Supervisor.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	during(stopped)
	time.Sleep(time.Until(stopped.Add(down)))
	sup, err := containerd.New(ctx, containerd.Config{Dir: rt.Dir, Binary: os.Getenv(ctrfw.EnvBinary), CNIBinDirs: params.CNIBinDirs,
		CNIConfDir: rt.CNIConfDir, StopTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rt.Supervisor, rt.CRI = sup, sup.Client()
	return time.Now()
}

// waitNodeReady waits until the node's Ready condition has status want and, for a False one, a message
// starting with msgPrefix.
func waitNodeReady(t *testing.T, c kubernetes.Interface, node string, want v1.ConditionStatus, msgPrefix string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("node %s Ready=%s", node, want), func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r := readyCondition(n)
		if r == nil {
			return false, "no Ready condition"
		}
		ok := r.Status == want && (want == v1.ConditionTrue || (r.Reason == "KubeletNotReady" && strings.HasPrefix(r.Message, msgPrefix)))
		return ok, fmt.Sprintf("%+v", r)
	})
}
