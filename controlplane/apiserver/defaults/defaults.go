// Package defaults fills the fields the Kubernetes API defaults when a client leaves them empty, for the
// fields kubelets, controllers and kubectl rely on. Values follow kube-apiserver's defaulting
// (k8s.io/kubernetes pkg/apis/{core,apps,batch}/v1/defaults.go); pod specs (of pods and of templates) are
// defaulted by podspec.Default, which the kubelet's static pods share. Register installs them into a
// scheme so they run whenever a request body or a stored object is decoded.
package defaults

import (
	"maps"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Register adds the defaulting functions to s.
func Register(s *runtime.Scheme) {
	registerAdmissionRegistration(s)
	registerStorage(s)
	registerFlowcontrol(s)
	registerScheduling(s)
	registerNetworking(s)
	registerAutoscaling(s)
	s.AddTypeDefaultingFunc(&rbacv1.RoleBinding{}, func(o any) {
		b := o.(*rbacv1.RoleBinding)
		Binding(&b.RoleRef, b.Subjects)
	})
	s.AddTypeDefaultingFunc(&rbacv1.ClusterRoleBinding{}, func(o any) {
		b := o.(*rbacv1.ClusterRoleBinding)
		Binding(&b.RoleRef, b.Subjects)
	})
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(o any) { podspec.Default(&o.(*corev1.Pod).Spec) })
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o any) { Service(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o any) {
		if sec := o.(*corev1.Secret); sec.Type == "" {
			sec.Type = corev1.SecretTypeOpaque
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o any) {
		for i := range o.(*corev1.Endpoints).Subsets {
			for j := range o.(*corev1.Endpoints).Subsets[i].Ports {
				p := &o.(*corev1.Endpoints).Subsets[i].Ports[j]
				if p.Protocol == "" {
					p.Protocol = corev1.ProtocolTCP
				}
			}
		}
	})
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o any) {
		for i := range o.(*discoveryv1.EndpointSlice).Ports {
			if p := &o.(*discoveryv1.EndpointSlice).Ports[i]; p.Protocol == nil {
				p.Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	})
	s.AddTypeDefaultingFunc(&corev1.LimitRange{}, func(o any) {
		for i := range o.(*corev1.LimitRange).Spec.Limits {
			LimitRangeItem(&o.(*corev1.LimitRange).Spec.Limits[i])
		}
	})
	s.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(o any) { podspec.Default(&o.(*corev1.PodTemplate).Template.Spec) })
	s.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(o any) { ReplicationController(o.(*corev1.ReplicationController)) })
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o any) { Deployment(o.(*appsv1.Deployment)) })
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o any) {
		rs := o.(*appsv1.ReplicaSet)
		if rs.Spec.Replicas == nil {
			rs.Spec.Replicas = ptr.To[int32](1)
		}
		podspec.Default(&rs.Spec.Template.Spec)
	})
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o any) { DaemonSet(o.(*appsv1.DaemonSet)) })
	s.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(o any) { StatefulSet(o.(*appsv1.StatefulSet)) })
	s.AddTypeDefaultingFunc(&batchv1.Job{}, func(o any) {
		j := o.(*batchv1.Job)
		if len(j.Labels) == 0 {
			j.Labels = j.Spec.Template.Labels
		}
		JobSpec(&j.Spec)
	})
	s.AddTypeDefaultingFunc(&batchv1.CronJob{}, func(o any) { CronJob(o.(*batchv1.CronJob)) })
}

// CronJob defaults concurrencyPolicy Allow, suspend false, successfulJobsHistoryLimit 3,
// failedJobsHistoryLimit 1 and the job template's pod template, as kube-apiserver does (the job
// template's Job fields are defaulted on the Jobs made from it).
func CronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	podspec.Default(&s.JobTemplate.Spec.Template.Spec)
}

// JobSpec defaults a Job spec as kube-apiserver does: completions and parallelism 1 when both are
// unset, else parallelism 1; backoffLimit 6 (MaxInt32 with backoffLimitPerIndex); completionMode
// NonIndexed; suspend and manualSelector false; podReplacementPolicy Failed with a podFailurePolicy,
// else TerminatingOrFailed; and the pod template.
func JobSpec(s *batchv1.JobSpec) {
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptr.To[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr.To[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptr.To[int32](math.MaxInt32)
		} else {
			s.BackoffLimit = ptr.To[int32](6)
		}
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptr.To(false)
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	podspec.Default(&s.Template.Spec)
}

// Service defaults type ClusterIP, sessionAffinity None, port protocol TCP, targetPort = port, and the
// traffic policies (internal Cluster; external Cluster for NodePort and LoadBalancer services).
func Service(svc *corev1.Service) {
	s := &svc.Spec
	if s.Type == "" {
		s.Type = corev1.ServiceTypeClusterIP
	}
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Type != corev1.ServiceTypeExternalName && s.InternalTrafficPolicy == nil {
		s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if (s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer) && s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
}

// Deployment defaults replicas 1, a RollingUpdate strategy of 25%/25%, revisionHistoryLimit 10,
// progressDeadlineSeconds 600 and the pod template.
func Deployment(d *appsv1.Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = ptr.To[int32](1)
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.Strategy.RollingUpdate.MaxUnavailable == nil {
			s.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if s.Strategy.RollingUpdate.MaxSurge == nil {
			s.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	podspec.Default(&s.Template.Spec)
}

// DaemonSet defaults a RollingUpdate strategy (maxUnavailable 1, maxSurge 0), revisionHistoryLimit 10
// and the pod template.
func DaemonSet(ds *appsv1.DaemonSet) {
	s := &ds.Spec
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			s.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if s.UpdateStrategy.RollingUpdate.MaxSurge == nil {
			s.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	podspec.Default(&s.Template.Spec)
}

// Binding defaults an RBAC binding (RoleBinding or ClusterRoleBinding) as kube-apiserver's
// SetDefaults_RoleBinding, SetDefaults_ClusterRoleBinding and SetDefaults_Subject do: an empty
// roleRef.apiGroup becomes rbac.authorization.k8s.io, and so does the apiGroup of User and Group
// subjects (ServiceAccount subjects keep the core group "").
func Binding(roleRef *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if roleRef.APIGroup == "" {
		roleRef.APIGroup = rbacv1.GroupName
	}
	Subjects(subjects)
}

// Subjects defaults an RBAC binding's User and Group subjects' apiGroup to rbac.authorization.k8s.io
// (ServiceAccount subjects keep the core group ""), as kube-apiserver's SetDefaults_Subject.
func Subjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// ReplicationController defaults an RC as kube-apiserver does: with a template, an empty selector and
// empty labels are the template's labels; replicas 1; and the template's pod spec.
func ReplicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = maps.Clone(t.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = maps.Clone(t.Labels)
		}
		podspec.Default(&t.Spec)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptr.To[int32](1)
	}
}

// StatefulSet defaults as kube-apiserver 1.37 does (SetDefaults_StatefulSet, MaxUnavailableStatefulSet
// on): podManagementPolicy OrderedReady; a RollingUpdate strategy with partition 0 and maxUnavailable
// 1; persistentVolumeClaimRetentionPolicy Retain/Retain; replicas 1; revisionHistoryLimit 10; and the
// pod template.
func StatefulSet(ss *appsv1.StatefulSet) {
	s := &ss.Spec
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := s.UpdateStrategy.RollingUpdate; s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = ptr.To[int32](0)
		}
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Replicas == nil {
		s.Replicas = ptr.To[int32](1)
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	podspec.Default(&s.Template.Spec)
}

// LimitRangeItem defaults a Container item as kube-apiserver does: a resource with a max but no default
// gets default = max; one with a default but no defaultRequest gets defaultRequest = default, else
// defaultRequest = min.
func LimitRangeItem(item *corev1.LimitRangeItem) {
	if item.Type != corev1.LimitTypeContainer {
		return
	}
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	for _, from := range []struct{ src, dst corev1.ResourceList }{
		{item.Max, item.Default}, {item.Default, item.DefaultRequest}, {item.Min, item.DefaultRequest},
	} {
		for k, v := range from.src {
			if _, ok := from.dst[k]; !ok {
				from.dst[k] = v.DeepCopy()
			}
		}
	}
}
