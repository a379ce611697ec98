package admission

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func limitRange(items ...corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

func TestLimitRangeDefaults(t *testing.T) {
	lr := limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "500m", "memory", "256Mi"), DefaultRequest: rl("cpu", "100m")})
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers: []corev1.Container{{Name: "a"}, {Name: "b", Resources: corev1.ResourceRequirements{
			Limits: rl("cpu", "2"), Requests: rl("cpu", "1")}}}}}
	ApplyLimitRangeDefaults(lr, pod)
	a, b, init := pod.Spec.Containers[0].Resources, pod.Spec.Containers[1].Resources, pod.Spec.InitContainers[0].Resources
	if a.Limits.Cpu().String() != "500m" || a.Limits.Memory().String() != "256Mi" || a.Requests.Cpu().String() != "100m" {
		t.Errorf("container a: %+v", a)
	}
	if b.Limits.Cpu().String() != "2" || b.Limits.Memory().String() != "256Mi" || b.Requests.Cpu().String() != "1" {
		t.Errorf("container b keeps its own and gains only memory: %+v", b)
	}
	if init.Limits.Cpu().String() != "500m" {
		t.Errorf("init container: %+v", init)
	}
	want := "LimitRanger plugin set: cpu, memory limit for container a; cpu request for container a; memory limit for container b; " +
		"cpu, memory limit for init container init; cpu request for init container init"
	if got := pod.Annotations[LimitRangerAnnotation]; got != want {
		t.Errorf("annotation %q\nwant       %q", got, want)
	}
}

func TestLimitRangeConstraints(t *testing.T) {
	container := func(requests, limits corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
	}
	for _, c := range []struct {
		name string
		item corev1.LimitRangeItem
		pod  corev1.PodSpec
		want string // "" = allowed
	}{
		{"min ok", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m")},
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "100m"), nil)}}, ""},
		{"min request", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m")},
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "50m"), nil)}}, "minimum cpu usage per Container is 100m, but request is 50m"},
		{"min no request", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, "minimum cpu usage per Container is 100m.  No request is specified"},
		{"max limit", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("memory", "2Gi"))}}, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
		{"max no limit", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, "maximum memory usage per Container is 1Gi.  No limit is specified"},
		{"init container max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("memory", "1Gi"))}, InitContainers: []corev1.Container{container(nil, rl("memory", "3Gi"))}},
			"maximum memory usage per Container is 1Gi, but limit is 3Gi"},
		{"ratio", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "2")},
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "100m"), rl("cpu", "500m"))}}, "cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000"},
		{"ratio ok", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "2")},
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "250m"), rl("cpu", "500m"))}}, ""},
		{"pod sum", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "600m")), container(nil, rl("cpu", "600m"))}},
			"maximum cpu usage per Pod is 1, but limit is 1200m"},
		{"pod init counted as max", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "600m"))}, InitContainers: []corev1.Container{container(nil, rl("cpu", "900m"))}}, ""},
		{"pod sidecar added", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
			corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "600m"))}, InitContainers: []corev1.Container{{Name: "s",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Limits: rl("cpu", "600m")}}}},
			"maximum cpu usage per Pod is 1, but limit is 1200m"},
	} {
		err := CheckLimitRange(limitRange(c.item), &corev1.Pod{Spec: c.pod})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestLimitRangerPlugin: defaults then limits through the plugin; the live list is used while the cache
// holds none, and reused within liveTTL.
func TestLimitRangerPlugin(t *testing.T) {
	lr := limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi"), Default: rl("memory", "512Mi")})
	c := fake.NewClientset(lr)
	lists := 0
	c.PrependReactor("list", "limitranges", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	p := NewLimitRanger()
	p.SetExternalKubeClientSet(c)
	p.SetExternalKubeInformerFactory(informers.NewSharedInformerFactory(c, 0))
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}
	if err := admitAndValidate(p, podAttrs(pod, admission.Create)); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Resources.Limits.Memory().String(); got != "512Mi" {
		t.Errorf("defaulted memory limit %s, want 512Mi", got)
	}
	big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a",
		Resources: corev1.ResourceRequirements{Limits: rl("memory", "2Gi")}}}}}
	err := admitAndValidate(p, podAttrs(big, admission.Create))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum memory usage per Container is 1Gi, but limit is 2Gi") {
		t.Errorf("over max: %v", err)
	}
	if lists != 1 {
		t.Errorf("%d live lists within the TTL, want 1", lists)
	}
	now = now.Add(liveTTL)
	if err := admitAndValidate(p, podAttrs(pod.DeepCopy(), admission.Create)); err != nil {
		t.Fatal(err)
	}
	if lists != 2 {
		t.Errorf("%d live lists after the TTL, want 2", lists)
	}
}
