// Package defaults fills the fields the Kubernetes API defaults when a client leaves them empty, for the
// fields kubelets, controllers and kubectl rely on. Values follow kube-apiserver's defaulting
// (k8s.io/kubernetes pkg/apis/{core,apps}/v1/defaults.go). Register installs them into a scheme so they
// run whenever a request body or a stored object is decoded.
package defaults

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Register adds the defaulting functions to s.
func Register(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(o any) { PodSpec(&o.(*corev1.Pod).Spec) })
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
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o any) { Deployment(o.(*appsv1.Deployment)) })
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o any) {
		rs := o.(*appsv1.ReplicaSet)
		if rs.Spec.Replicas == nil {
			rs.Spec.Replicas = ptr.To[int32](1)
		}
		PodSpec(&rs.Spec.Template.Spec)
	})
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o any) { DaemonSet(o.(*appsv1.DaemonSet)) })
}

// PodSpec defaults a pod spec (also used for pod templates): restartPolicy Always, dnsPolicy ClusterFirst,
// terminationGracePeriodSeconds 30, schedulerName default-scheduler, and each container's defaults.
func PodSpec(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	for i := range spec.InitContainers {
		Container(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		Container(&spec.Containers[i])
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		switch {
		case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
			v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
		case v.Secret != nil && v.Secret.DefaultMode == nil:
			v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
		case v.HostPath != nil && v.HostPath.Type == nil:
			v.HostPath.Type = ptr.To(corev1.HostPathUnset)
		}
	}
}

// Container defaults imagePullPolicy (Always for :latest or untagged images, else IfNotPresent), the
// termination message path and policy, port protocols, resource requests from limits, and probe defaults.
func Container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = PullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	if len(c.Resources.Limits) > 0 {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		Probe(p)
	}
}

// PullPolicyFor is the default imagePullPolicy for image: Always when the tag is "latest" or absent and
// there is no digest, IfNotPresent otherwise.
func PullPolicyFor(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i < 0 || name[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// Probe defaults timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold 3, and for HTTP
// GET handlers path "/" and scheme HTTP. A nil probe is left alone.
func Probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
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
	PodSpec(&s.Template.Spec)
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
	PodSpec(&s.Template.Spec)
}
