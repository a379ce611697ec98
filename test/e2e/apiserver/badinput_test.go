package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// badRequest is one hostile request: its answer must be a metav1.Status with code, and (when field is
// set) a cause naming field.
type badRequest struct {
	name, verb, path, contentType, body string
	code                                int32
	field                               string
}

// send runs r and checks the Status it gets back.
func (r badRequest) check(ctx context.Context, t *testing.T, rc rest.Interface) {
	t.Helper()
	ct := r.contentType
	if ct == "" {
		ct = "application/json"
	}
	path, query, _ := strings.Cut(r.path, "?")
	req := rc.Verb(r.verb).AbsPath(path).SetHeader("Content-Type", ct)
	if k, v, ok := strings.Cut(query, "="); ok {
		req = req.Param(k, v)
	}
	if r.body != "" {
		req = req.Body([]byte(r.body))
	}
	err := req.Do(ctx).Error()
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Errorf("%s: want a Status error with code %d, got %v", r.name, r.code, err)
		return
	}
	s := st.Status()
	if s.Code != r.code {
		t.Errorf("%s: code %d (%s: %s), want %d", r.name, s.Code, s.Reason, s.Message, r.code)
		return
	}
	if r.field == "" {
		return
	}
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Field == r.field {
				return
			}
		}
	}
	b, _ := json.Marshal(s)
	t.Errorf("%s: no cause for field %s: %s", r.name, r.field, b)
}

func keyCount(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestHostileCreates sends bodies a clumsy or hostile client could: each is refused with a Status naming
// the field, and no object or ClusterIP/NodePort allocation is left in etcd.
func TestHostileCreates(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, rc := ctxT(t), s.Client.CoreV1().RESTClient()
	cli := s.Etcd(t)
	ranges := keyCount(ctx, t, cli, "/registry/ranges/")
	podBody := func(meta string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":` + meta + `,"spec":{"containers":[{"name":"c","image":"i"}]}}`
	}
	svcBody := func(name, spec string) string {
		return `{"apiVersion":"v1","kind":"Service","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
	}
	long := strings.Repeat("a", 300)
	pods := "/api/v1/namespaces/default/pods"
	svcs := "/api/v1/namespaces/default/services"
	deps := "/apis/apps/v1/namespaces/default/deployments"
	depBody := func(replicas string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":` + replicas +
			`,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	}
	for _, r := range []badRequest{
		{name: "huge name", verb: "POST", path: pods, body: podBody(`{"name":"` + long + `"}`), code: 422, field: "metadata.name"},
		{name: "uppercase name", verb: "POST", path: pods, body: podBody(`{"name":"Web"}`), code: 422, field: "metadata.name"},
		{name: "slash in name", verb: "POST", path: pods, body: podBody(`{"name":"a/b"}`), code: 422, field: "metadata.name"},
		{name: "dot in service name", verb: "POST", path: svcs, body: svcBody("a.b", `{"ports":[{"port":80}]}`), code: 422, field: "metadata.name"},
		{name: "dot in namespace name", verb: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a.b"}}`, code: 422, field: "metadata.name"},
		{name: "namespace does not exist", verb: "POST", path: "/api/v1/namespaces/nope/pods", body: podBody(`{"name":"x"}`), code: 404},
		{name: "apiVersion mismatch", verb: "POST", path: pods, body: `{"apiVersion":"apps/v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, code: 400},
		{name: "kind mismatch", verb: "POST", path: pods, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, code: 400},
		{name: "metadata.namespace differs from URL", verb: "POST", path: pods, body: podBody(`{"name":"x","namespace":"kube-system"}`), code: 400},
		{name: "wrong-typed replicas", verb: "POST", path: deps, body: depBody(`"three"`), code: 400},
		{name: "negative replicas", verb: "POST", path: deps, body: depBody(`-1`), code: 422, field: "spec.replicas"},
		{name: "unknown field strict", verb: "POST", path: pods + "?fieldValidation=Strict", body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`, code: 400},
		{name: "port 0", verb: "POST", path: svcs, body: svcBody("s", `{"ports":[{"port":0}]}`), code: 422, field: "spec.ports[0].port"},
		{name: "port 65536", verb: "POST", path: svcs, body: svcBody("s", `{"ports":[{"port":65536}]}`), code: 422, field: "spec.ports[0].port"},
		{name: "duplicate ports", verb: "POST", path: svcs, body: svcBody("dup", `{"ports":[{"name":"a","port":80},{"name":"b","port":80}]}`), code: 422, field: "spec.ports[1]"},
		{name: "unknown protocol", verb: "POST", path: svcs, body: svcBody("s", `{"ports":[{"port":80,"protocol":"FOO"}]}`), code: 422, field: "spec.ports[0].protocol"},
		{name: "clusterIP outside range", verb: "POST", path: svcs, body: svcBody("s", `{"clusterIP":"192.168.7.7","ports":[{"port":80}]}`), code: 422, field: "spec.clusterIP"},
		{name: "clusterIP garbage", verb: "POST", path: svcs, body: svcBody("s", `{"clusterIP":"not-an-ip","ports":[{"port":80}]}`), code: 422, field: "spec.clusterIP"},
		{name: "nodePort out of range", verb: "POST", path: svcs, body: svcBody("s", `{"type":"NodePort","ports":[{"port":80,"nodePort":29999}]}`), code: 422, field: "spec.ports[0].nodePort"},
		{name: "nodePort 70000", verb: "POST", path: svcs, body: svcBody("s", `{"type":"NodePort","ports":[{"port":80,"nodePort":70000}]}`), code: 422, field: "spec.ports[0].nodePort"},
		{name: "duplicate nodePort in one service", verb: "POST", path: svcs, body: svcBody("dupnp", `{"type":"NodePort","ports":[{"name":"a","port":80,"nodePort":30100},{"name":"b","port":81,"nodePort":30100}]}`), code: 422, field: "spec.ports[1].nodePort"},
		{name: "valid nodePort, invalid rest", verb: "POST", path: svcs, body: svcBody("s", `{"type":"NodePort","clusterIP":"10.96.0.77","sessionAffinity":"Bogus","ports":[{"port":80,"nodePort":30101}]}`), code: 422, field: "spec.sessionAffinity"},
		{name: "garbage body", verb: "POST", path: pods, body: `\x00\x01garbage`, code: 400},
		{name: "huge body", verb: "POST", path: "/api/v1/namespaces/default/configmaps", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":"` + strings.Repeat("x", 4<<20) + `"}}`, code: 413},
	} {
		r.check(ctx, t, rc)
	}
	for _, p := range []string{"/registry/pods/", "/registry/services/specs/default/s", "/registry/services/specs/default/dup", "/registry/services/specs/default/dupnp", "/registry/deployments/", "/registry/configmaps/default/big", "/registry/namespaces/a.b"} {
		if n := keyCount(ctx, t, cli, p); n != 0 {
			t.Errorf("refused creates left %d keys under %s", n, p)
		}
	}
	if n := keyCount(ctx, t, cli, "/registry/ranges/"); n != ranges {
		t.Errorf("refused creates leaked allocations: %d keys under /registry/ranges/, want %d", n, ranges)
	}
}

// TestServiceAllocationsHostile: a second create of an existing service (same explicit ClusterIP and
// NodePort) fails AlreadyExists without freeing the first service's values; concurrent creates of one
// name leave exactly one service and its allocations; taken values and immutable fields are refused.
func TestServiceAllocationsHostile(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client.CoreV1().Services("default")
	cli := s.Etcd(t)
	svc := func(name, ip string, np int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80, NodePort: np}}}}
	}
	if _, err := c.Create(ctx, svc("a", "10.96.0.50", 30050), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, svc("a", "10.96.0.50", 30050), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create of a: want 409 AlreadyExists, got %v", err)
	}
	for _, k := range []string{"/registry/ranges/serviceips/10.96.0.50", "/registry/ranges/servicenodeports/30050"} {
		if keyCount(ctx, t, cli, k) != 1 {
			t.Errorf("failed duplicate create released %s of the existing service", k)
		}
	}
	if _, err := c.Create(ctx, svc("b", "10.96.0.50", 0), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("ClusterIP of a reused by b: want 422, got %v", err)
	}
	if _, err := c.Create(ctx, svc("b", "", 30050), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("NodePort of a reused by b: want 422, got %v", err)
	}
	// The `kubernetes` service's ClusterIP stays taken across restarts (bootstrap re-creates it each start).
	s.Restart(t)
	if _, err := c.Create(ctx, svc("b", "10.96.0.1", 0), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("ClusterIP of the kubernetes service after a restart: want 422, got %v", err)
	}
	if keyCount(ctx, t, cli, "/registry/ranges/serviceips/10.96.0.1") != 1 {
		t.Errorf("restart released the kubernetes service's ClusterIP")
	}
	// immutable clusterIP
	a, err := c.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.ClusterIP, a.Spec.ClusterIPs = "10.96.0.51", []string{"10.96.0.51"}
	if _, err := c.Update(ctx, a, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("clusterIP change: want 422, got %v", err)
	}
	// Type changes: becoming ExternalName drops and releases the ClusterIP; leaving it allocates one.
	tc, err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "tc"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldIP := tc.Spec.ClusterIP
	tc.Spec.Type, tc.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	if tc, err = c.Update(ctx, tc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("ClusterIP -> ExternalName: %v", err)
	}
	if tc.Spec.ClusterIP != "" || keyCount(ctx, t, cli, "/registry/ranges/serviceips/"+oldIP) != 0 {
		t.Errorf("ExternalName service keeps ClusterIP %q (allocation of %s kept: %d)", tc.Spec.ClusterIP, oldIP,
			keyCount(ctx, t, cli, "/registry/ranges/serviceips/"+oldIP))
	}
	tc.Spec.Type, tc.Spec.ExternalName = corev1.ServiceTypeClusterIP, ""
	if tc, err = c.Update(ctx, tc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("ExternalName -> ClusterIP: %v", err)
	}
	if tc.Spec.ClusterIP == "" || keyCount(ctx, t, cli, "/registry/ranges/serviceips/"+tc.Spec.ClusterIP) != 1 {
		t.Errorf("service leaving ExternalName got ClusterIP %q without an allocation", tc.Spec.ClusterIP)
	}
	if _, err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", ClusterIP: "10.96.0.99"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("ExternalName with a clusterIP: want 422, got %v", err)
	}
	ext, err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext2"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ext.Spec.Type, ext.Spec.ExternalName, ext.Spec.Ports = corev1.ServiceTypeClusterIP, "", []corev1.ServicePort{{Port: 80}}
	if ext, err = c.Update(ctx, ext, metav1.UpdateOptions{}); err != nil || ext.Spec.ClusterIP == "" {
		t.Errorf("created ExternalName -> ClusterIP: want a ClusterIP, got %v %v", ext, err)
	}
	for _, n := range []string{"tc", "ext2"} {
		if err := c.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// concurrent creates of one name
	before := keyCount(ctx, t, cli, "/registry/ranges/")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Create(ctx, svc("race", "", 0), metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !apierrors.IsAlreadyExists(err):
			t.Errorf("concurrent create: want nil or AlreadyExists, got %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("concurrent creates: %d succeeded, want 1", ok)
	}
	if n := keyCount(ctx, t, cli, "/registry/ranges/"); n != before+2 {
		t.Errorf("concurrent creates: %d allocation keys, want %d (one ClusterIP and one NodePort)", n, before+2)
	}
	// NodePort update to a taken port
	race, err := c.Get(ctx, "race", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	race.Spec.Ports[0].NodePort = 30050
	if _, err := c.Update(ctx, race, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("update to a taken NodePort: want 422, got %v", err)
	}
	if n := keyCount(ctx, t, cli, "/registry/ranges/"); n != before+2 {
		t.Errorf("refused update changed allocations: %d keys, want %d", n, before+2)
	}
}

// TestHostilePatchesAndBinding: garbage bodies for each patch type answer 4xx; a pod bound twice gets
// 409; pod updates of immutable fields are refused; creating in a terminating/deleted namespace fails.
func TestHostilePatchesAndBinding(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := c.CoreV1().RESTClient()
	for _, pt := range []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"} {
		for i, body := range []string{`garbage{`, `[{"op":"explode","path":"/spec"}]`, `{"spec":{"containers":"nope"}}`, `42`} {
			path := "/api/v1/namespaces/default/pods/p"
			if pt == "application/apply-patch+yaml" {
				path += "?fieldManager=t"
			}
			req := rc.Patch("").AbsPath(path).SetHeader("Content-Type", pt).Body([]byte(body))
			err := req.Do(ctx).Error()
			st, ok := err.(apierrors.APIStatus)
			if !ok || st.Status().Code < 400 || st.Status().Code >= 500 {
				t.Errorf("patch %s body %d %q: want a 4xx Status, got %v", pt, i, body, err)
			}
		}
	}
	p, err := c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Containers[0].Name != "c" {
		t.Fatalf("garbage patches changed the pod: %+v", p.Spec.Containers)
	}
	// immutable pod fields
	p.Spec.Containers[0].Image = "other:1"
	p.Spec.Containers[0].Name = "renamed"
	if _, err := c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("pod container rename: want 422, got %v", err)
	}
	p.Spec.Containers[0].Name = "c"
	if _, err := c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Errorf("pod image change: want success, got %v", err)
	}
	// bind twice
	bind := func(node string) error {
		return c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	if err := bind("n1"); err != nil {
		t.Fatal(err)
	}
	if err := bind("n2"); !apierrors.IsConflict(err) {
		t.Errorf("second binding: want 409, got %v", err)
	}
	if err := bind(""); !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		t.Errorf("binding to an empty node: want 422/409, got %v", err)
	}
	// deleted namespace
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CoreV1().Pods("gone").Create(ctx, pod("late", ""), metav1.CreateOptions{})
	if err == nil {
		t.Errorf("create in a deleted namespace succeeded")
	} else if st, ok := err.(apierrors.APIStatus); !ok || (st.Status().Code != 403 && st.Status().Code != 404) {
		t.Errorf("create in a deleted namespace: want 403/404, got %v", err)
	}
	_ = fmt.Sprint
}
