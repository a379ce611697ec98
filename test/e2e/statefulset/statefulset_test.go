// Package statefulset_test checks the StatefulSet end to end on one real cluster: the bundled API
// server (embedded etcd), the scheduler, the StatefulSet and garbage-collector controllers under the
// controller manager's own identity (so its RBAC role is exercised), and the production node agent
// (agent.Run) on a private real containerd running the demo image.
package statefulset_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/kubelet"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

type cluster struct {
	api    *apiserver.Server
	rt     *containerd.Runtime
	client kubernetes.Interface
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "sts-" + hex.EncodeToString(b[:])
	cgroupRoot := fwagent.CgroupRoot(t, name) // removed last, after containerd removed the pods
	c := &cluster{rt: containerd.Start(t, containerd.Options{}), api: apiserver.Start(t, apiserver.Options{})}
	c.client = c.api.Client
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := fwagent.Config(t, name, c.rt, c.api)
	cfg.Kubelet.CgroupRoot, cfg.Logger = cgroupRoot, log
	cfg.Kubelet.NodeStatusUpdateFrequency = metav1.Duration{Duration: time.Second}
	cfg.TuneKubelet = func(k *kubelet.Config) { k.HousekeepingPeriod = time.Second }
	fwagent.Start(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", what, err)
			}
		}()
	}
	sched, cm := c.api.SchedulerClient(t), c.api.ControllerManagerClient(t)
	run("scheduler", func() error {
		return scheduler.Run(ctx, sched, scheduler.Options{Logger: log, RetryInterval: time.Second})
	})
	run("controllers", func() error {
		return controllers.Run(ctx, cm, controllers.Options{Logger: log,
			Controllers: []string{controllers.StatefulSet, controllers.GarbageCollector}})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// recorder keeps the order of pod events of the set as the API server's watch delivers them.
type recorder struct {
	mu  sync.Mutex
	log []string // "ADDED web-0", "READY web-0", "DELETING web-2", "DELETED web-2"
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.log, s) {
		r.log = append(r.log, s)
	}
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// reset forgets what was recorded (DELETED and READY lines repeat for a recreated pod).
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = nil
}

func (r *recorder) index(s string) int { return slices.Index(r.snapshot(), s) }

func watchPods(t *testing.T, client kubernetes.Interface, selector string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added:
				r.add("ADDED " + p.Name + " " + string(p.UID))
			case watch.Deleted:
				r.add("DELETED " + p.Name + " " + string(p.UID))
				continue
			}
			if p.DeletionTimestamp != nil {
				r.add("DELETING " + p.Name + " " + string(p.UID))
			} else if p.Status.Phase == v1.PodRunning && ready(p) {
				r.add("READY " + p.Name + " " + string(p.UID))
			}
		}
	}()
	return r
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func webSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent}}}},
		},
	}
}

// TestStatefulSet: a set of 3 comes up one pod at a time in ordinal order with stable names and
// identity; a deleted pod comes back under its name; a rolling update with partition 1 replaces web-2
// then web-1 and leaves web-0; scaling to 1 through /scale removes web-2 then web-1; deleting the set
// removes its pods; and a set with a Block volumeClaimTemplate is refused.
func TestStatefulSet(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	rec := watchPods(t, c.client, "app=web")
	start := time.Now()

	// a raw Block volumeClaimTemplate: refused with the field path, nothing stored (the claims of
	// volumeClaimTemplates are tested in test/e2e/storage).
	bad := webSet(1)
	bad.Name = "claims"
	bad.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeMode: ptr.To(v1.PersistentVolumeBlock),
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	_, err := c.client.AppsV1().StatefulSets(ns).Create(ctx, bad, metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !asStatus(err, &se) || se.ErrStatus.Code != 422 || !hasCause(se, "spec.volumeClaimTemplates[0].spec.volumeMode", "Block") {
		t.Fatalf("create with a Block volumeClaimTemplate: want 422 on spec.volumeClaimTemplates[0].spec.volumeMode, got %v", err)
	}
	if _, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, "claims", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused set was stored: %v", err)
	}

	set, err := c.client.AppsV1().StatefulSets(ns).Create(ctx, webSet(3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	eventually(t, 90*time.Second, "3 Ready pods", func() error {
		s, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Status.ReadyReplicas != 3 || s.Status.AvailableReplicas != 3 || s.Status.CurrentReplicas != 3 || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("status %+v", s.Status)
		}
		return nil
	})
	t.Logf("3 pods Ready %v after create", time.Since(start).Round(time.Millisecond))
	assertTable(t, c.client, "web", "3/3")
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = string(p.UID)
		if !metav1.IsControlledBy(p, set) || p.Labels[appsv1.StatefulSetPodNameLabel] != name || p.Labels[appsv1.PodIndexLabel] != fmt.Sprint(i) ||
			p.Spec.Hostname != name || p.Spec.Subdomain != "web" {
			t.Errorf("%s: owner %v labels %v hostname %q subdomain %q", name, p.OwnerReferences, p.Labels, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if i == 0 {
			// the pod's own view of its identity, from the real container
			id := containerID(t, p)
			if out, _, code := c.rt.Exec(t, id, "hostname"); code != 0 || strings.TrimSpace(out) != "web-0" {
				t.Errorf("hostname in web-0: %q (exit %d)", out, code)
			}
			if out, _, _ := c.rt.Exec(t, id, "cat", "/etc/hosts"); !strings.Contains(out, "web-0.web.default.svc.cluster.local") {
				t.Errorf("/etc/hosts of web-0 lacks its FQDN:\n%s", out)
			}
		}
	}
	// OrderedReady: each pod was created only after its predecessor was Ready.
	for i := 1; i < 3; i++ {
		prev, cur := fmt.Sprintf("web-%d", i-1), fmt.Sprintf("web-%d", i)
		readyAt, addedAt := rec.index("READY "+prev+" "+uids[prev]), rec.index("ADDED "+cur+" "+uids[cur])
		if readyAt < 0 || addedAt < 0 || readyAt > addedAt {
			t.Errorf("%s created before %s was Ready: %v", cur, prev, rec.snapshot())
		}
	}

	// Delete web-1: it comes back under the same name (a new pod), Ready.
	rec.reset()
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	eventually(t, 60*time.Second, "web-1 recreated and Ready", func() error {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(p.UID) == uids["web-1"] || !ready(p) || p.DeletionTimestamp != nil {
			return fmt.Errorf("web-1 uid %s ready %v", p.UID, ready(p))
		}
		uids["web-1"] = string(p.UID)
		return nil
	})
	t.Logf("web-1 recreated and Ready %v after its deletion", time.Since(t0).Round(time.Millisecond))

	// Rolling update with partition 1: web-2 then web-1 move to v2, web-0 stays at v1.
	rec.reset()
	t0 = time.Now()
	eventually(t, 10*time.Second, "update the template", func() error {
		s, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Template.Spec.Containers[0].Image = bundled.DemoServerV2
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
		_, err = c.client.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	var st appsv1.StatefulSetStatus
	eventually(t, 90*time.Second, "web-2 and web-1 at v2", func() error {
		s, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st = s.Status
		if st.UpdatedReplicas != 2 || st.ReadyReplicas != 3 || st.CurrentReplicas != 1 || st.CurrentRevision == st.UpdateRevision {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	t.Logf("partitioned rolling update done %v after the template change", time.Since(t0).Round(time.Millisecond))
	images := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		images[name] = p.Spec.Containers[0].Image
		wantRev := st.UpdateRevision
		if i == 0 {
			wantRev = st.CurrentRevision
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != wantRev {
			t.Errorf("%s at revision %s, want %s", name, p.Labels[appsv1.ControllerRevisionHashLabelKey], wantRev)
		}
		uids[name] = string(p.UID)
	}
	if images["web-0"] != bundled.DemoServerV1 || images["web-1"] != bundled.DemoServerV2 || images["web-2"] != bundled.DemoServerV2 {
		t.Errorf("images after the partitioned update: %v", images)
	}
	log := rec.snapshot()
	if i2, i1 := slices.IndexFunc(log, func(s string) bool { return strings.HasPrefix(s, "DELETING web-2 ") }),
		slices.IndexFunc(log, func(s string) bool { return strings.HasPrefix(s, "DELETING web-1 ") }); i2 < 0 || i1 < 0 || i2 > i1 {
		t.Errorf("rolling update did not replace web-2 before web-1: %v", log)
	}
	if slices.ContainsFunc(log, func(s string) bool { return strings.HasPrefix(s, "DELETING web-0 ") }) {
		t.Errorf("web-0, below the partition, was replaced: %v", log)
	}
	revs, err := c.client.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(revs.Items) != 2 {
		t.Errorf("controllerrevisions: %v %v, want 2", revs, err)
	}

	// Scale to 1 through /scale: web-2 goes first, web-1 only once web-2 is gone.
	rec.reset()
	t0 = time.Now()
	eventually(t, 10*time.Second, "scale to 1", func() error {
		sc, err := c.client.AppsV1().StatefulSets(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sc.Status.Selector != "app=web" {
			return fmt.Errorf("scale selector %q", sc.Status.Selector)
		}
		_, err = c.client.AppsV1().StatefulSets(ns).UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: sc.ObjectMeta,
			Spec: autoscalingv1.ScaleSpec{Replicas: 1}}, metav1.UpdateOptions{})
		return err
	})
	eventually(t, 60*time.Second, "1 replica", func() error {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		s, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Name != "web-0" || s.Status.Replicas != 1 {
			return fmt.Errorf("%d pods, status %+v", len(pods.Items), s.Status)
		}
		return nil
	})
	t.Logf("scaled 3 -> 1 in %v", time.Since(t0).Round(time.Millisecond))
	del2, gone2, del1 := rec.index("DELETING web-2 "+uids["web-2"]), rec.index("DELETED web-2 "+uids["web-2"]), rec.index("DELETING web-1 "+uids["web-1"])
	if del2 < 0 || gone2 < 0 || del1 < 0 || del2 > del1 || gone2 > del1 {
		t.Errorf("scale-down order: want web-2 deleted and gone before web-1's deletion starts: %v", rec.snapshot())
	}
	if evs := events(t, c.client, "web"); !slices.Contains(evs, "SuccessfulDelete: delete Pod web-2 in StatefulSet web successful") ||
		!slices.Contains(evs, "SuccessfulCreate: create Pod web-0 in StatefulSet web successful") {
		t.Errorf("events of web: %q", evs)
	}

	// Deleting the set: the garbage collector removes its pod.
	if err := c.client.AppsV1().StatefulSets(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pods of the deleted set gone", func() error {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// assertTable: the server-side table kubectl prints has NAME, READY and AGE, READY being ready/desired.
func assertTable(t *testing.T, client kubernetes.Interface, name, ready string) {
	t.Helper()
	raw, err := client.AppsV1().RESTClient().Get().Namespace(ns).Resource("statefulsets").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if !slices.Equal(cols, []string{"Name", "Ready", "Age"}) || len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != 3 ||
		tbl.Rows[0].Cells[0] != name || tbl.Rows[0].Cells[1] != ready {
		t.Errorf("table: columns %v rows %+v", cols, tbl.Rows)
	}
}

func asStatus(err error, se **apierrors.StatusError) bool {
	s, ok := err.(*apierrors.StatusError)
	*se = s
	return ok
}

func hasCause(se *apierrors.StatusError, field, msg string) bool {
	if se.ErrStatus.Details == nil {
		return false
	}
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return true
		}
	}
	return false
}

func containerID(t *testing.T, p *v1.Pod) string {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	return id
}

// events returns "<reason>: <message>" of the events of StatefulSet name.
func events(t *testing.T, client kubernetes.Interface, name string) []string {
	t.Helper()
	var out []string
	eventually(t, 10*time.Second, "events", func() error {
		list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		out = nil
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "StatefulSet" && e.InvolvedObject.Name == name {
				out = append(out, e.Reason+": "+e.Message)
			}
		}
		if !slices.ContainsFunc(out, func(s string) bool { return strings.Contains(s, "delete Pod web-2") }) {
			return fmt.Errorf("no deletion event yet: %q", out)
		}
		return nil
	})
	return out
}
