package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

const (
	// DefaultServiceAccountName is the ServiceAccount a pod without spec.serviceAccountName runs as.
	DefaultServiceAccountName = "default"
	// ServiceAccountVolumeName prefixes the name of the token volume the plugin adds
	// (kube-api-access-<5 random characters>).
	ServiceAccountVolumeName = "kube-api-access"
	// ServiceAccountMountPath is where every container finds token, ca.crt and namespace.
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountTokenSeconds is the requested lifetime of the projected token (kube-apiserver's
	// 3607 s: one hour and a few seconds, which marks the token as one the kubelet refreshes).
	ServiceAccountTokenSeconds = 3607
	// RootCAConfigMap names the ConfigMap of every namespace that holds the cluster CA under ca.crt.
	RootCAConfigMap = "kube-root-ca.crt"
)

// ServiceAccount is Kubernetes' ServiceAccount admission plugin for pods. On create it sets
// spec.serviceAccountName to "default" when empty, refuses (403) a pod whose ServiceAccount does not
// exist, and, unless the pod's automountServiceAccountToken (or else the ServiceAccount's) is false, adds
// the projected volume kube-api-access-<random> (a bound token for the account, the cluster CA from the
// kube-root-ca.crt ConfigMap, the namespace) mounted read-only at ServiceAccountMountPath in every
// container and init container that mounts nothing there yet. Mirror pods (the kubelet's static pods)
// are exempt, but may not name a ServiceAccount nor project a token. (A change of spec.serviceAccountName
// on update is refused by the pod's update validation, which keeps the spec immutable; ephemeral
// containers, added through pods/ephemeralcontainers, get no token mount, as upstream.)
//
// The account is read from the shared informer's cache; on a miss it is read from the API again (up to
// 10 times, 100–200 ms apart, for "default", which the ServiceAccount controller creates just after
// the namespace), so a pod made right after its namespace does not fail spuriously.
type ServiceAccount struct {
	client   kubernetes.Interface
	accounts corelisters.ServiceAccountLister
	// retryInterval and name are replaceable in tests.
	retryInterval func() time.Duration
	name          func(prefix string) string
}

var (
	_ admission.MutationInterface                  = &ServiceAccount{}
	_ admission.ValidationInterface                = &ServiceAccount{}
	_ initializer.WantsExternalKubeClientSet       = &ServiceAccount{}
	_ initializer.WantsExternalKubeInformerFactory = &ServiceAccount{}
	_ admission.InitializationValidator            = &ServiceAccount{}
)

// NewServiceAccount returns the plugin; the admission initializers give it its client and informers.
func NewServiceAccount() *ServiceAccount {
	return &ServiceAccount{
		retryInterval: func() time.Duration { return time.Duration(100+rand.IntN(100)) * time.Millisecond },
		name:          func(prefix string) string { return prefix + utilrand.String(5) },
	}
}

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (p *ServiceAccount) SetExternalKubeClientSet(c kubernetes.Interface) { p.client = c }

// SetExternalKubeInformerFactory implements initializer.WantsExternalKubeInformerFactory.
func (p *ServiceAccount) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	p.accounts = f.Core().V1().ServiceAccounts().Lister()
}

// ValidateInitialization implements admission.InitializationValidator.
func (p *ServiceAccount) ValidateInitialization() error {
	if p.client == nil || p.accounts == nil {
		return fmt.Errorf("ServiceAccount admission: missing client or informers")
	}
	return nil
}

// Handles pod creation.
func (p *ServiceAccount) Handles(op admission.Operation) bool { return op == admission.Create }

// pod returns the pod of a pods request (no subresource), or nil.
func podOf(a admission.Attributes) *corev1.Pod {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, _ := a.GetObject().(*corev1.Pod)
	return pod
}

// Admit defaults the account and adds the token volume and mounts (see ServiceAccount).
func (p *ServiceAccount) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	pod := podOf(a)
	if pod == nil || a.GetOperation() != admission.Create {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil // Validate checks it
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
		pod.Spec.DeprecatedServiceAccount = DefaultServiceAccountName //nolint:staticcheck // kept in step, as upstream
	}
	sa, err := p.account(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	if automount(sa, pod) {
		p.mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		for _, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
		}
	}
	return nil
}

// Validate refuses a pod without an existing account, and a mirror pod naming an account or projecting
// a token.
func (p *ServiceAccount) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod := podOf(a)
	if pod == nil || a.GetOperation() != admission.Create {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not reference service accounts"))
		}
		for _, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections"))
				}
			}
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		return admission.NewForbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.GetNamespace(), pod.Name))
	}
	if _, err := p.account(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName); err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	return nil
}

// account reads the ServiceAccount from the cache, else live (retrying for "default"); a missing one
// is a NotFound error.
func (p *ServiceAccount) account(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa, err := p.accounts.ServiceAccounts(namespace).Get(name)
	if err == nil {
		return sa, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	attempts := 1
	if name == DefaultServiceAccountName {
		attempts = 10
	}
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(p.retryInterval()):
			}
		}
		sa, err := p.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// automount: the pod's automountServiceAccountToken wins over the account's; true when neither is set.
func automount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken mounts the token volume at ServiceAccountMountPath in every container and init container
// that mounts nothing there, adding the volume (reusing a kube-api-access-* one the pod has) when any
// container needed it.
func (p *ServiceAccount) mountToken(pod *corev1.Pod) {
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumeName+"-") {
			name = v.Name
			break
		}
	}
	haveVolume := name != ""
	if !haveVolume {
		name = p.name(ServiceAccountVolumeName + "-")
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath}
	needed := false
	add := func(cs []corev1.Container) {
		for i := range cs {
			if !mountsAt(cs[i].VolumeMounts, ServiceAccountMountPath) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	if needed && !haveVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

func mountsAt(mounts []corev1.VolumeMount, path string) bool {
	for _, m := range mounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// TokenVolumeSource is the projected source of the token volume: a token for the pod's account
// (ServiceAccountTokenSeconds, file "token"), ca.crt from the kube-root-ca.crt ConfigMap, and the
// pod's namespace (file "namespace"); files mode 0644.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](ServiceAccountTokenSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}
