package objectcache_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/kubelet/objectcache"
	"github.com/nodekit/nodekit/test/framework/apiserver"
)

// requests records the requests a client sends: "METHOD path?query".
type requests struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// count returns how many recorded requests contain every one of parts.
func (r *requests) count(parts ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestWatchedObjects, against a real API server with the node's credentials: a registered pod's
// ConfigMap and Secret are read from per-object watches (field selector metadata.name, allowed by the
// Node authorizer because a pod bound to the node names them), with no GET per read; an update reaches
// the cache; a missing object is NotFound until it is created; an object no pod of the node names is
// not readable (the Node authorizer refuses the GET the cache falls back to); unregistering stops the
// watches.
func TestWatchedObjects(t *testing.T) {
	api := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := api.Client.CoreV1()
	const ns, node = "default", "n-objcache"
	if _, err := admin.ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "v1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"p": []byte("s")}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: v1.PodSpec{NodeName: node,
		Volumes: []v1.Volume{{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}}}},
		Containers: []v1.Container{{Name: "c", Image: "img", Env: []v1.EnvVar{
			{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "p"}}},
			{Name: "L", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "later"}, Key: "k"}}},
		}}}}}
	pod, err := admin.Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(api.NodeConfig(t, node))
	rec := &requests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	m := objectcache.New(kubernetes.NewForConfigOrDie(cfg), slog.Default())
	defer m.Stop()
	// The Node authorizer learns of the pod asynchronously: wait until the node may read the ConfigMap.
	eventually(t, "node may read configmap cfg", func() bool {
		_, err := kubernetes.NewForConfigOrDie(api.NodeConfig(t, node)).CoreV1().ConfigMaps(ns).Get(ctx, "cfg", metav1.GetOptions{})
		return err == nil
	})
	m.RegisterPod(pod)
	for i := 0; i < 5; i++ {
		cm, err := m.GetConfigMap(ctx, ns, "cfg")
		if err != nil || cm.Data["k"] != "v1" {
			t.Fatalf("GetConfigMap cfg: %v %v, want k=v1", cm, err)
		}
		cm.Data["k"] = "changed by the caller" // a copy: the cache keeps its own
		s, err := m.GetSecret(ctx, ns, "sec")
		if err != nil || string(s.Data["p"]) != "s" {
			t.Fatalf("GetSecret sec: %v %v", s, err)
		}
	}
	if n := rec.count("GET /api/v1/namespaces/default/configmaps/cfg"); n != 0 {
		t.Errorf("%d GETs of configmap cfg, want none (served from its watch)", n)
	}
	if n := rec.count("/api/v1/namespaces/default/configmaps", "watch=true", "fieldSelector=metadata.name%3Dcfg"); n == 0 {
		t.Errorf("no watch of configmap cfg by name; requests: %v", rec.seen)
	}
	if _, err := m.GetConfigMap(ctx, ns, "later"); !apierrors.IsNotFound(err) {
		t.Errorf("GetConfigMap of a missing configmap: %v, want NotFound", err)
	}

	if _, err := admin.ConfigMaps(ns).Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "v2"}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"k": "now"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update and the creation reach the cache", func() bool {
		cm, err := m.GetConfigMap(ctx, ns, "cfg")
		later, lerr := m.GetConfigMap(ctx, ns, "later")
		return err == nil && cm.Data["k"] == "v2" && lerr == nil && later.Data["k"] == "now"
	})

	if _, err := m.GetConfigMap(ctx, ns, "unrelated"); !apierrors.IsForbidden(err) {
		t.Errorf("GetConfigMap of a configmap no pod of the node names: %v, want Forbidden", err)
	}

	m.UnregisterPod(pod.UID)
	before := rec.count("GET /api/v1/namespaces/default/configmaps/cfg")
	if _, err := m.GetConfigMap(ctx, ns, "cfg"); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("GET /api/v1/namespaces/default/configmaps/cfg"); n != before+1 {
		t.Errorf("after UnregisterPod a read made %d GETs, want 1 (no watch left)", n-before)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
