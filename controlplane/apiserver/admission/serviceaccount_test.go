package admission

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// newSAPlugin returns the plugin over a fake client holding objs and an empty (never started) informer
// cache, so every lookup goes live.
func newSAPlugin(t *testing.T, objs ...runtime.Object) (*ServiceAccount, *fake.Clientset) {
	t.Helper()
	c := fake.NewClientset(objs...)
	p := NewServiceAccount()
	p.SetExternalKubeClientSet(c)
	p.SetExternalKubeInformerFactory(informers.NewSharedInformerFactory(c, 0))
	p.retryInterval = func() time.Duration { return time.Millisecond }
	p.name = func(prefix string) string { return prefix + "abcde" }
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	return p, c
}

func podAttrs(pod *corev1.Pod, op admission.Operation) admission.Attributes {
	return admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", op, nil, false, nil)
}

func admitAndValidate(p interface {
	admission.MutationInterface
	admission.ValidationInterface
}, a admission.Attributes) error {
	if err := p.Admit(context.Background(), a, nil); err != nil {
		return err
	}
	return p.Validate(context.Background(), a, nil)
}

func sa(name string, automount *bool) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, AutomountServiceAccountToken: automount,
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}}
}

func TestServiceAccountMountsToken(t *testing.T) {
	p, _ := newSAPlugin(t, sa("default", nil))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i"}},
		Containers:     []corev1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: ServiceAccountMountPath}}}},
	}}
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", pod.Spec.ServiceAccountName)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Name != "kube-api-access-abcde" || pod.Spec.Volumes[0].Projected == nil {
		t.Fatalf("volumes %+v, want kube-api-access-abcde", pod.Spec.Volumes)
	}
	want := corev1.VolumeMount{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: ServiceAccountMountPath}
	for _, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[0]} {
		if len(c.VolumeMounts) != 1 || !reflect.DeepEqual(c.VolumeMounts[0], want) {
			t.Errorf("container %s mounts %+v, want %+v", c.Name, c.VolumeMounts, want)
		}
	}
	if m := pod.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "own" {
		t.Errorf("container b already mounting there got %+v, want its own mount only", m)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "pull" {
		t.Errorf("imagePullSecrets %+v, want the account's", pod.Spec.ImagePullSecrets)
	}
}

func TestServiceAccountAutomount(t *testing.T) {
	for _, c := range []struct {
		name        string
		pod, sa     *bool
		wantVolumes int
	}{
		{"neither", nil, nil, 1},
		{"pod false", ptr.To(false), nil, 0},
		{"sa false", nil, ptr.To(false), 0},
		{"pod true over sa false", ptr.To(true), ptr.To(false), 1},
		{"pod false over sa true", ptr.To(false), ptr.To(true), 0},
	} {
		p, _ := newSAPlugin(t, sa("app", c.sa))
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{ServiceAccountName: "app",
			AutomountServiceAccountToken: c.pod, Containers: []corev1.Container{{Name: "a"}}}}
		if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err != nil {
			t.Fatal(err)
		}
		if len(pod.Spec.Volumes) != c.wantVolumes || len(pod.Spec.Containers[0].VolumeMounts) != c.wantVolumes {
			t.Errorf("%s: volumes %+v mounts %+v, want %d", c.name, pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts, c.wantVolumes)
		}
	}
}

func TestServiceAccountMissing(t *testing.T) {
	p, c := newSAPlugin(t)
	var gets atomic.Int32
	c.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{ServiceAccountName: "nobody", Containers: []corev1.Container{{Name: "a"}}}}
	err := admitAndValidate(p, podAttrs(pod, admission.Create))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account ns/nobody: serviceaccount "nobody" not found`) {
		t.Fatalf("missing account: %v", err)
	}
	if gets.Load() != 1 {
		t.Errorf("%d live lookups of a named account, want 1", gets.Load())
	}
	gets.Store(0)
	pod.Spec.ServiceAccountName = ""
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); !apierrors.IsForbidden(err) {
		t.Fatalf("missing default account: %v, want 403", err)
	}
	if gets.Load() != 10 {
		t.Errorf("%d live lookups of the default account, want 10", gets.Load())
	}
}

// TestServiceAccountDefaultCreatedLate: the default account appearing during the retries is found.
func TestServiceAccountDefaultCreatedLate(t *testing.T) {
	p, c := newSAPlugin(t)
	var gets atomic.Int32
	c.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets.Add(1) == 3 {
			return true, sa("default", nil), nil
		}
		return false, nil, nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}
	if err := p.Admit(context.Background(), podAttrs(pod, admission.Create), nil); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 1 {
		t.Errorf("volumes %+v, want the token volume", pod.Spec.Volumes)
	}
}

func TestServiceAccountMirrorPod(t *testing.T) {
	p, _ := newSAPlugin(t) // no account at all: mirror pods need none
	mirror := map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: mirror}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "" || len(pod.Spec.Volumes) != 0 {
		t.Errorf("mirror pod changed: %+v", pod.Spec)
	}
	pod.Spec.ServiceAccountName = "app"
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err == nil || !strings.Contains(err.Error(), "a mirror pod may not reference service accounts") {
		t.Errorf("mirror pod naming an account: %v", err)
	}
	pod.Spec.ServiceAccountName = ""
	pod.Spec.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}}}
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err == nil || !strings.Contains(err.Error(), "ServiceAccountToken volume projections") {
		t.Errorf("mirror pod projecting a token: %v", err)
	}
}

func TestServiceAccountIgnoresOthers(t *testing.T) {
	p, _ := newSAPlugin(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	status := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "p",
		corev1.SchemeGroupVersion.WithResource("pods"), "status", admission.Create, nil, false, nil)
	if err := admitAndValidate(p, status); err != nil || pod.Spec.ServiceAccountName != "" {
		t.Errorf("pods/status: %v, %+v; want untouched", err, pod.Spec)
	}
	if p.Handles(admission.Update) || !p.Handles(admission.Create) {
		t.Error("want create only")
	}
}
