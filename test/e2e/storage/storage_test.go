// Package storage_test checks local storage end to end on one real cluster: the bundled API server
// (embedded etcd) with the local-storage add-on's default StorageClass, the scheduler and the
// PersistentVolume controller under their own identities (so their RBAC roles and the Node authorizer's
// claim → volume edge are exercised), and the production node agent (agent.Run) on a private real
// containerd running the demo image.
package storage_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/internal/localpath"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type cluster struct {
	client  kubernetes.Interface
	node    string
	storage string // the node's local-path directory
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "stor-" + hex.EncodeToString(b[:])
	cgroupRoot := fwagent.CgroupRoot(t, name) // removed last, after containerd removed the pods
	rt, api := containerd.Start(t, containerd.Options{}), apiserver.Start(t, apiserver.Options{})
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	if err := addons.Reconcile(ctx, api.Client, addons.Options{Disabled: []string{addons.CoreDNS}, ServiceCIDR: "10.96.0.0/12"}, log); err != nil {
		t.Fatal(err)
	}
	cfg := fwagent.Config(t, name, rt, api)
	cfg.Kubelet.CgroupRoot, cfg.Logger = cgroupRoot, log
	fwagent.Start(t, cfg)
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
	sched, cm := api.SchedulerClient(t), api.ControllerManagerClient(t)
	run("scheduler", func() error {
		return scheduler.Run(ctx, sched, scheduler.Options{Logger: log, RetryInterval: time.Second})
	})
	run("controllers", func() error {
		return controllers.Run(ctx, cm, controllers.Options{Logger: log,
			Controllers: []string{controllers.PersistentVolumeBinder, controllers.StatefulSet, controllers.GarbageCollector, controllers.ServiceAccount}})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &cluster{client: api.Client, node: name, storage: agent.Config{DataDir: cfg.DataDir}.Paths().Storage}
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

func claim(name string, class *string, mode ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	if len(mode) == 0 {
		mode = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: mode, StorageClassName: class,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}}}}
}

// pod runs one toolbox command (the demo server when none) with claim mounted at /data and never
// restarts.
func pod(name, claimName string, readOnly bool, command ...string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "c", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent, Command: command,
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimName, ReadOnly: readOnly}}}}}}
}

func (c *cluster) runToEnd(t *testing.T, p *v1.Pod) v1.PodPhase {
	t.Helper()
	ctx := context.Background()
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase v1.PodPhase
	eventually(t, 2*time.Minute, "pod "+p.Name+" to finish", func() error {
		got, err := c.client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = got.Status.Phase
		if phase == v1.PodSucceeded || phase == v1.PodFailed {
			return nil
		}
		return fmt.Errorf("phase %s, conditions %+v", phase, got.Status.Conditions)
	})
	return phase
}

func (c *cluster) deletePod(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod "+name+" to be gone", func() error {
		_, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want 422 Invalid naming %s", err, field)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		for _, c := range status.Status().Details.Causes {
			if c.Field == field {
				return
			}
		}
	}
	t.Fatalf("422 %v does not name field %s", err, field)
}

// TestLocalStorage runs both storage tests on one cluster.
//
// claims: bad volumes and claims are refused with 422 naming the field; a claim without a
// class gets the default local-path class and stays Pending until a pod uses it; then it is provisioned
// on the pod's node and bound, the pod writes into it, and a recreated pod finds the file; a readOnly
// claim volume cannot be written; a pod whose claim is unbound does not start and says why; the claim of
// a running pod is kept (pvc-protection); deleting the claim removes the volume and its directory; a static hostPath volume binds to a matching claim and is
// Released (its directory kept) under Retain when the claim goes.
//
// statefulset: a set with a volumeClaimTemplate gets one claim per ordinal (data-db-<n>), each
// provisioned and bound; with whenScaled=Delete, scaling down deletes the condemned pod's claim and
// so its volume; with whenDeleted=Delete, deleting the set deletes the remaining claims.
func TestLocalStorage(t *testing.T) {
	c := startCluster(t)
	t.Run("claims", func(t *testing.T) { testClaims(t, c) })
	t.Run("statefulset", func(t *testing.T) { testStatefulSet(t, c) })
}

func testClaims(t *testing.T, c *cluster) {
	ctx := context.Background()
	pvs, pvcs := c.client.CoreV1().PersistentVolumes(), c.client.CoreV1().PersistentVolumeClaims(ns)
	start := time.Now()

	// bad specs
	hostPV := func(name, path string) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Mi")},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: "manual",
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}}}
	}
	nfs := hostPV("nfs", "/x")
	nfs.Spec.HostPath, nfs.Spec.NFS = nil, &v1.NFSVolumeSource{Server: "10.0.0.1", Path: "/export"}
	_, err := pvs.Create(ctx, nfs, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.nfs")
	block := hostPV("block", "/x")
	block.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	_, err = pvs.Create(ctx, block, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.volumeMode")
	_, err = pvs.Create(ctx, hostPV("relative", "data"), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.hostPath.path")
	blockClaim := claim("block", nil)
	blockClaim.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	_, err = pvcs.Create(ctx, blockClaim, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.volumeMode")
	noSize := claim("nosize", nil)
	noSize.Spec.Resources.Requests = nil
	_, err = pvcs.Create(ctx, noSize, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.resources.requests[storage]")

	// the default class; WaitForFirstConsumer keeps the claim Pending without a pod
	data, err := pvcs.Create(ctx, claim("data", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data.Spec.StorageClassName == nil || *data.Spec.StorageClassName != localpath.DefaultClass || data.Status.Phase != v1.ClaimPending {
		t.Fatalf("claim data: class %v phase %s, want %s Pending", data.Spec.StorageClassName, data.Status.Phase, localpath.DefaultClass)
	}
	grown := data.DeepCopy()
	grown.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("2Mi")
	_, err = pvcs.Update(ctx, grown, metav1.UpdateOptions{})
	wantInvalid(t, err, "spec")
	eventually(t, 30*time.Second, "WaitForFirstConsumer event", func() error { return hasEvent(ctx, c.client, "data", "WaitForFirstConsumer") })

	// first consumer: provisioned on its node, bound, written
	token := "written-" + hex.EncodeToString([]byte(t.Name()))[:8]
	if phase := c.runToEnd(t, pod("app", "data", false, "touch", "/data/"+token)); phase != v1.PodSucceeded {
		t.Fatalf("writer pod: %s", phase)
	}
	data, err = pvcs.Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data.Status.Phase != v1.ClaimBound || data.Annotations["volume.kubernetes.io/selected-node"] != c.node ||
		data.Annotations["pv.kubernetes.io/bind-completed"] != "yes" || data.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Fatalf("claim data after first pod: phase %s annotations %v", data.Status.Phase, data.Annotations)
	}
	pv, err := pvs.Get(ctx, data.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.storage, pv.Name)
	if pv.Status.Phase != v1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != data.UID || pv.Spec.HostPath == nil ||
		pv.Spec.HostPath.Path != dir || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || pv.Spec.NodeAffinity == nil {
		t.Fatalf("volume %s: %+v status %+v", pv.Name, pv.Spec, pv.Status)
	}
	if _, err := os.Stat(filepath.Join(dir, token)); err != nil {
		t.Fatalf("the pod's file on the node: %v", err)
	}
	t.Logf("claim provisioned, bound and written in %v", time.Since(start).Round(time.Millisecond))

	// the pod recreated finds the file; a readOnly mount refuses writes
	c.deletePod(t, "app")
	if phase := c.runToEnd(t, pod("app", "data", false, "cat", "/data/"+token)); phase != v1.PodSucceeded {
		t.Fatalf("recreated pod reading the file: %s", phase)
	}
	if phase := c.runToEnd(t, pod("readonly", "data", true, "touch", "/data/other")); phase != v1.PodFailed {
		t.Fatalf("pod writing to a readOnly claim volume: %s, want Failed", phase)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
		t.Fatalf("readOnly pod wrote into the volume: %v", err)
	}

	// a pod on the node whose claim is unbound: not started, FailedMount says why
	if _, err := pvcs.Create(ctx, claim("unbound", ptr.To("")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting := pod("waiting", "unbound", false, "true")
	waiting.Spec.NodeName = c.node
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, waiting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "FailedMount of pod waiting", func() error {
		return hasEventMessage(ctx, c.client, "waiting", "FailedMount", `persistentvolumeclaim "unbound" is not bound`)
	})
	if got, _ := c.client.CoreV1().Pods(ns).Get(ctx, "waiting", metav1.GetOptions{}); got.Status.Phase != v1.PodPending || len(got.Status.ContainerStatuses) > 0 && got.Status.ContainerStatuses[0].State.Running != nil {
		t.Fatalf("pod with an unbound claim: phase %s statuses %+v", got.Status.Phase, got.Status.ContainerStatuses)
	}
	c.deletePod(t, "waiting")

	// pvc-protection: the claim of a running pod stays Terminating, its volume Bound, until the pod goes
	c.deletePod(t, "app")
	c.deletePod(t, "readonly")
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod("holder", "data", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod holder running", func() error {
		got, err := c.client.CoreV1().Pods(ns).Get(ctx, "holder", metav1.GetOptions{})
		if err != nil || got.Status.Phase != v1.PodRunning {
			return fmt.Errorf("holder: %v %v", got.Status.Phase, err)
		}
		return nil
	})
	if err := pvcs.Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		got, err := pvcs.Get(ctx, "data", metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("claim of a running pod: %v (deletionTimestamp %v), want it kept Terminating", err, got.DeletionTimestamp)
		}
		if v, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{}); err != nil || v.Status.Phase != v1.VolumeBound {
			t.Fatalf("volume of a claim in use: %v %v, want Bound", v.Status.Phase, err)
		}
	}

	// reclaim Delete: the volume and its directory go with the claim once its last pod is gone
	deleted := time.Now()
	c.deletePod(t, "holder")
	eventually(t, 2*time.Minute, "volume "+pv.Name+" deleted", func() error {
		if _, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("volume directory %s after reclaim: %v", dir, err)
	}
	t.Logf("last pod deleted → claim released, directory removed and volume deleted in %v", time.Since(deleted).Round(time.Millisecond))

	// a static hostPath volume (Retain) binds to a matching claim of its class; Released when the claim goes
	static := t.TempDir()
	if _, err := pvs.Create(ctx, hostPV("static", static), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pvcs.Create(ctx, claim("static", ptr.To("manual")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "static claim bound", func() error {
		got, err := pvcs.Get(ctx, "static", metav1.GetOptions{})
		if err != nil || got.Status.Phase != v1.ClaimBound || got.Spec.VolumeName != "static" {
			return fmt.Errorf("claim %v %v", got.Status, err)
		}
		return nil
	})
	if err := pvcs.Delete(ctx, "static", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "static volume Released", func() error {
		got, err := pvs.Get(ctx, "static", metav1.GetOptions{})
		if err != nil || got.Status.Phase != v1.VolumeReleased {
			return fmt.Errorf("volume %v %v", got.Status, err)
		}
		return nil
	})
	if _, err := os.Stat(static); err != nil {
		t.Fatalf("retained volume's directory: %v", err)
	}
}

func hasEvent(ctx context.Context, client kubernetes.Interface, object, reason string) error {
	return hasEventMessage(ctx, client, object, reason, "")
}

func hasEventMessage(ctx context.Context, client kubernetes.Interface, object, reason, message string) error {
	evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": object, "reason": reason}.String()})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, message) {
			return nil
		}
	}
	return fmt.Errorf("no %s event of %s with %q among %d", reason, object, message, len(evs.Items))
}

func testStatefulSet(t *testing.T, c *cluster) {
	ctx := context.Background()
	pvcs := c.client.CoreV1().PersistentVolumeClaims(ns)
	labels := map[string]string{"app": "db"}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](2), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "demo", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent,
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
		VolumeClaimTemplates: []v1.PersistentVolumeClaim{*claim("data", nil)},
	}}
	start := time.Now()
	set, err := c.client.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	volumes := map[string]string{}
	eventually(t, 2*time.Minute, "pods db-0 and db-1 running on bound claims", func() error {
		for _, ord := range []string{"0", "1"} {
			p, err := c.client.CoreV1().Pods(ns).Get(ctx, "db-"+ord, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning {
				return fmt.Errorf("pod db-%s: %v", ord, err)
			}
			cl, err := pvcs.Get(ctx, "data-db-"+ord, metav1.GetOptions{})
			if err != nil || cl.Status.Phase != v1.ClaimBound {
				return fmt.Errorf("claim data-db-%s: %v", ord, err)
			}
			if cl.Labels["app"] != "db" || len(cl.OwnerReferences) != 1 || cl.OwnerReferences[0].UID != set.UID {
				return fmt.Errorf("claim data-db-%s labels %v owners %v", ord, cl.Labels, cl.OwnerReferences)
			}
			volumes[ord] = cl.Spec.VolumeName
		}
		return nil
	})
	t.Logf("set of 2 with claims running in %v", time.Since(start).Round(time.Millisecond))

	// scale down: db-1's claim goes with the pod (whenScaled=Delete), and its volume with the claim
	// The controller's status writes move the resourceVersion the scale carries: retry on conflict,
	// as any client of /scale does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := c.client.AppsV1().StatefulSets(ns).GetScale(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 1
		_, err = c.client.AppsV1().StatefulSets(ns).UpdateScale(ctx, "db", scale, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "claim data-db-1 and its volume deleted", func() error {
		if _, err := pvcs.Get(ctx, "data-db-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim: %v", err)
		}
		if _, err := c.client.CoreV1().PersistentVolumes().Get(ctx, volumes["1"], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume: %v", err)
		}
		return nil
	})
	if _, err := pvcs.Get(ctx, "data-db-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("claim of the remaining pod: %v", err)
	}

	// delete the set: the remaining claim goes (whenDeleted=Delete)
	bg := metav1.DeletePropagationBackground
	if err := c.client.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "claim data-db-0 and its volume deleted", func() error {
		if _, err := pvcs.Get(ctx, "data-db-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim: %v", err)
		}
		if _, err := c.client.CoreV1().PersistentVolumes().Get(ctx, volumes["0"], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume: %v", err)
		}
		return nil
	})
}
