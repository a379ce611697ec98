package podspec

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Default fills the fields of a pod spec (also a pod template's) that the API defaults when a client
// leaves them empty: restartPolicy Always, dnsPolicy ClusterFirst, terminationGracePeriodSeconds 30,
// schedulerName default-scheduler, an empty securityContext, enableServiceLinks true, each init, app and
// ephemeral container (DefaultContainer), and the volumes' defaults (configMap and secret defaultMode 0644,
// hostPath type ""). Fields already set are kept.
func Default(spec *v1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = new(int64(v1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = new(bool(v1.DefaultEnableServiceLinks))
	}
	for i := range spec.InitContainers {
		DefaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		DefaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		DefaultContainer((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		switch {
		case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
			v.ConfigMap.DefaultMode = new(v1.ConfigMapVolumeSourceDefaultMode)
		case v.Secret != nil && v.Secret.DefaultMode == nil:
			v.Secret.DefaultMode = new(v1.SecretVolumeSourceDefaultMode)
		case v.HostPath != nil && v.HostPath.Type == nil:
			v.HostPath.Type = new(v1.HostPathUnset)
		}
	}
}

// DefaultContainer fills a container's defaulted fields: imagePullPolicy (DefaultPullPolicy of its
// image), terminationMessagePath /dev/termination-log, terminationMessagePolicy File, port protocol TCP,
// a request equal to the limit for every resource that has a limit but no request, and its probes'
// defaults (timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold 3; HTTP GET path "/"
// and scheme HTTP).
func DefaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	if len(c.Resources.Limits) > 0 {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
}

// DefaultPullPolicy is the imagePullPolicy the API gives a container that sets none: Always when the
// image reference's tag is "latest", or when it has neither a tag nor a digest (the tag then is
// "latest"); IfNotPresent otherwise (another tag, or a digest without a tag). "busybox:latest@sha256:…"
// is Always, "busybox@sha256:…" and "registry:5000/busybox:1.36" are IfNotPresent.
func DefaultPullPolicy(image string) v1.PullPolicy {
	name, _, digested := strings.Cut(image, "@")
	// A tag follows the last ':' of the last path component; a ':' before a '/' is a registry port.
	last := name[strings.LastIndex(name, "/")+1:]
	i := strings.LastIndex(last, ":")
	switch {
	case i >= 0 && last[i+1:] == "latest":
		return v1.PullAlways
	case i < 0 && !digested:
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// defaultProbe fills a probe's defaults; a nil probe is left alone.
func defaultProbe(p *v1.Probe) {
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
			h.Scheme = v1.URISchemeHTTP
		}
	}
}
