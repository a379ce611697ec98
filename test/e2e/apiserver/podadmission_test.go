package apiserver_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestPodAdmission: the ServiceAccount and LimitRanger admission plugins on the real API server, with
// the serviceaccount and root-ca-cert-publisher controllers the test server runs.
func TestPodAdmission(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := context.Background()
	pods := func(ns string) func(*corev1.Pod) (*corev1.Pod, error) {
		return func(p *corev1.Pod) (*corev1.Pod, error) {
			return s.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		}
	}
	newNS := func(t *testing.T, name string) string {
		if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "side", Image: "busybox"}}}}
	}

	t.Run("fresh namespace gets the token volume", func(t *testing.T) {
		// created at once after its namespace: the plugin waits for the controller's "default" account
		ns := newNS(t, "sa-fresh")
		got, err := pods(ns)(pod("p"))
		if err != nil {
			t.Fatalf("pod created right after its namespace: %v", err)
		}
		if got.Spec.ServiceAccountName != "default" {
			t.Errorf("serviceAccountName = %q, want default", got.Spec.ServiceAccountName)
		}
		var vol *corev1.Volume
		for i, v := range got.Spec.Volumes {
			if strings.HasPrefix(v.Name, "kube-api-access-") && len(v.Name) == len("kube-api-access-")+5 {
				vol = &got.Spec.Volumes[i]
			}
		}
		if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 3 {
			t.Fatalf("volumes %+v: want one projected kube-api-access-<5> with three sources", got.Spec.Volumes)
		}
		src := vol.Projected.Sources
		if tok := src[0].ServiceAccountToken; tok == nil || tok.Path != "token" || ptr.Deref(tok.ExpirationSeconds, 0) != 3607 {
			t.Errorf("first source %+v, want serviceAccountToken path token expirationSeconds 3607", src[0])
		}
		if cm := src[1].ConfigMap; cm == nil || cm.Name != "kube-root-ca.crt" || len(cm.Items) != 1 || cm.Items[0].Key != "ca.crt" {
			t.Errorf("second source %+v, want configMap kube-root-ca.crt key ca.crt", src[1])
		}
		if d := src[2].DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != "namespace" || d.Items[0].FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("third source %+v, want downwardAPI namespace", src[2])
		}
		for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
			found := false
			for _, m := range c.VolumeMounts {
				if m.Name == vol.Name && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly {
					found = true
				}
			}
			if !found {
				t.Errorf("container %s mounts %+v, want %s read-only at /var/run/secrets/kubernetes.io/serviceaccount", c.Name, c.VolumeMounts, vol.Name)
			}
		}
		// the account may not change afterwards (the pod's update validation keeps the spec immutable)
		if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got.Spec.ServiceAccountName = "other"
		if _, err := s.Client.CoreV1().Pods(ns).Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("changing serviceAccountName: %v, want 422", err)
		}
		if now, err := s.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil || now.Spec.ServiceAccountName != "default" {
			t.Errorf("after the refused update: %v, serviceAccountName %q; want default", err, now.Spec.ServiceAccountName)
		}
	})

	t.Run("automountServiceAccountToken false", func(t *testing.T) {
		ns := newNS(t, "sa-noauto")
		p := pod("p")
		p.Spec.AutomountServiceAccountToken = ptr.To(false)
		got, err := pods(ns)(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Volumes) != 0 || len(got.Spec.Containers[0].VolumeMounts) != 0 {
			t.Errorf("pod with automountServiceAccountToken=false got volumes %+v, mounts %+v", got.Spec.Volumes, got.Spec.Containers[0].VolumeMounts)
		}
		// the account's false applies when the pod says nothing; the pod's true wins over it
		if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
			AutomountServiceAccountToken: ptr.To(false)}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		q := pod("q")
		q.Spec.ServiceAccountName = "quiet"
		if got, err := pods(ns)(q); err != nil || len(got.Spec.Volumes) != 0 {
			t.Errorf("pod of an account with automount false: %v, volumes %+v; want none", err, got.Spec.Volumes)
		}
		r := pod("r")
		r.Spec.ServiceAccountName, r.Spec.AutomountServiceAccountToken = "quiet", ptr.To(true)
		if got, err := pods(ns)(r); err != nil || len(got.Spec.Volumes) != 1 {
			t.Errorf("pod saying automount true under an account saying false: %v, volumes %+v; want the token volume", err, got.Spec.Volumes)
		}
	})

	t.Run("missing account refused", func(t *testing.T) {
		ns := newNS(t, "sa-missing")
		p := pod("p")
		p.Spec.ServiceAccountName = "nobody"
		_, err := pods(ns)(p)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account sa-missing/nobody: serviceaccount "nobody" not found`) {
			t.Fatalf("pod naming a missing account: %v; want 403 with upstream's message", err)
		}
	})

	t.Run("LimitRange defaults and max", func(t *testing.T) {
		ns := newNS(t, "limits")
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Max:            corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("1")},
			Min:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}}
		stored, err := s.Client.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := stored.Spec.Limits[0].Default; d.Memory().String() != "512Mi" || d.Cpu().String() != "1" {
			t.Errorf("stored default %v, want max (cpu 1, memory 512Mi) as kube-apiserver defaults it", d)
		}
		got, err := pods(ns)(pod("p"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Spec.Containers {
			if c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Limits.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "512Mi" {
				t.Errorf("container %s resources %+v, want requests cpu 100m (memory 512Mi), limits cpu 1 memory 512Mi", c.Name, c.Resources)
			}
		}
		if !strings.HasPrefix(got.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: ") {
			t.Errorf("annotations %v, want kubernetes.io/limit-ranger", got.Annotations)
		}
		big := pod("big")
		big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		_, err = pods(ns)(big)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum memory usage per Container is 512Mi, but limit is 1Gi") {
			t.Errorf("pod over max: %v; want 403 maximum memory usage per Container is 512Mi, but limit is 1Gi", err)
		}
		small := pod("small")
		small.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		_, err = pods(ns)(small)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "minimum cpu usage per Container is 50m, but request is 10m") {
			t.Errorf("pod under min: %v; want 403 minimum cpu usage per Container is 50m, but request is 10m", err)
		}
	})

	t.Run("bad LimitRanges are 422", func(t *testing.T) {
		ns := newNS(t, "badlimits")
		q := resource.MustParse
		for _, c := range []struct {
			name  string
			item  corev1.LimitRangeItem
			field string
		}{
			{"type", corev1.LimitRangeItem{Type: "Node", Max: corev1.ResourceList{"cpu": q("1")}}, "spec.limits[0].type"},
			{"min-over-max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: corev1.ResourceList{"cpu": q("2")}, Max: corev1.ResourceList{"cpu": q("1")}}, "spec.limits[0].min[cpu]"},
			{"default-over-max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{"memory": q("2Gi")}, Max: corev1.ResourceList{"memory": q("1Gi")}}, "spec.limits[0].default[memory]"},
			{"request-over-default", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{"cpu": q("1")}, DefaultRequest: corev1.ResourceList{"cpu": q("2")}}, "spec.limits[0].defaultRequest[cpu]"},
			{"ratio", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{"cpu": q("500m")}}, "spec.limits[0].maxLimitRequestRatio[cpu]"},
			{"pod-default", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: corev1.ResourceList{"cpu": q("1")}}, "spec.limits[0].default"},
			{"pvc-storage", corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim}, "spec.limits[0].limits"},
		} {
			_, err := s.Client.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: c.name},
				Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{c.item}}}, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s: %v; want 422 naming %s", c.name, err, c.field)
			}
		}
	})
}
