package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func labelsSet(m map[string]string) labels.Set { return labels.Set(m) }

// Pod validates a pod: name and spec; a pod may not name a node while it has scheduling gates.
func Pod(p *corev1.Pod) field.ErrorList {
	errs := append(Subdomain(&p.ObjectMeta), PodSpec(&p.Spec, specPath)...)
	if p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// PodUpdate validates a pod update: most of the spec is immutable once created (image changes and
// activeDeadlineSeconds/tolerations additions and schedulingGates removals are allowed, as in Kubernetes);
// nodeName is set through binding.
func PodUpdate(p, old *corev1.Pod) field.ErrorList {
	errs := Pod(p)
	mut := p.Spec.DeepCopy()
	for i := range mut.Containers {
		if i < len(old.Spec.Containers) {
			mut.Containers[i].Image = old.Spec.Containers[i].Image
		}
	}
	for i := range mut.InitContainers {
		if i < len(old.Spec.InitContainers) {
			mut.InitContainers[i].Image = old.Spec.InitContainers[i].Image
		}
	}
	mut.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	errs = append(errs, onlyAddedTolerations(p.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	mut.Tolerations = old.Spec.Tolerations
	errs = append(errs, onlyDeletedSchedulingGates(p.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)
	mut.SchedulingGates = old.Spec.SchedulingGates
	if old.Spec.NodeName == "" {
		mut.NodeName = ""
	}
	if !apiequality.Semantic.DeepEqual(mut, &old.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or `spec.schedulingGates` (only deletions)"))
	}
	return errs
}

// resources checks a container's requests and limits as Kubernetes does for the values the kubelet turns
// into cgroup settings: no negative quantity, and no request above the limit of the same resource.
func resources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range r.Requests {
		rp := p.Child("requests").Key(string(name))
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp, q.String(), "must be greater than or equal to 0"))
		}
		if l, ok := r.Limits[name]; ok && q.Cmp(l) > 0 {
			errs = append(errs, field.Invalid(rp, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, l.String())))
		}
	}
	return errs
}

// onlyAddedTolerations allows tolerations to be added but not removed or changed, except an existing
// toleration's tolerationSeconds (as Kubernetes' pod update validation: the DefaultTolerationSeconds and
// taint-based eviction rely on tolerations never disappearing from a running pod).
func onlyAddedTolerations(tols, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, n := range tols {
			o.TolerationSeconds = n.TolerationSeconds
			if apiequality.Semantic.DeepEqual(o, n) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf("existing toleration %s=%s:%s can not be removed or modified except its tolerationSeconds", o.Key, o.Value, o.Effect))}
		}
	}
	return nil
}

// PodSpec validates containers (names, images, ports, probes), ephemeral containers, restartPolicy, dnsPolicy,
// volumes' names, sysctls, schedulingGates, priorityClassName and preemptionPolicy, affinity and
// topologySpreadConstraints.
func PodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "must have at least one container"))
	}
	names := sets.New[string]()
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		vp := p.Child("volumes").Index(i).Child("name")
		errs = append(errs, dnsLabel(v.Name, vp)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp, v.Name))
		}
		volumes.Insert(v.Name)
	}
	for i := range s.InitContainers {
		errs = append(errs, Container(&s.InitContainers[i], p.Child("initContainers").Index(i), names, volumes, true)...)
	}
	for i := range s.Containers {
		errs = append(errs, Container(&s.Containers[i], p.Child("containers").Index(i), names, volumes, false)...)
	}
	errs = append(errs, ephemeralContainers(s, p, names, volumes)...)
	// As Kubernetes: one hostPort per protocol and host IP across the pod's containers.
	hostPorts := sets.New[string]()
	for i, c := range s.Containers {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			k := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if hostPorts.Has(k) {
				errs = append(errs, field.Duplicate(p.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"), fmt.Sprintf("%d/%s", port.HostPort, port.Protocol)))
			}
			hostPorts.Insert(k)
		}
	}
	switch s.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch s.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy, []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	errs = append(errs, sysctls(s, p)...)
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if s.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(s.NodeName, false) {
			errs = append(errs, field.Invalid(p.Child("nodeName"), s.NodeName, msg))
		}
	}
	errs = append(errs, schedulingGates(s.SchedulingGates, p.Child("schedulingGates"))...)
	errs = append(errs, podPriority(s, p)...)
	errs = append(errs, affinity(s.Affinity, p.Child("affinity"))...)
	errs = append(errs, topologySpreadConstraints(s.TopologySpreadConstraints, p.Child("topologySpreadConstraints"))...)
	return errs
}

// Container validates one container: a DNS-1123 label name unique in the pod, an image, ports (1-65535,
// protocol, unique names), resources (non-negative, requests within limits), env names, volume mounts
// naming pod volumes, imagePullPolicy, terminationMessagePolicy, and probes.
func Container(c *corev1.Container, p *field.Path, names, volumes sets.Set[string], init bool) field.ErrorList {
	errs := dnsLabel(c.Name, p.Child("name"))
	if c.Name != "" && names.Has(c.Name) {
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	}
	names.Insert(c.Name)
	errs = append(errs, required(c.Image, p.Child("image"))...)
	errs = append(errs, resources(&c.Resources, p.Child("resources"))...)
	for i, e := range c.Env {
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	portNames := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		errs = append(errs, portNumber(port.ContainerPort, pp.Child("containerPort"))...)
		if port.HostPort != 0 {
			errs = append(errs, portNumber(port.HostPort, pp.Child("hostPort"))...)
		}
		errs = append(errs, protocol(port.Protocol, pp.Child("protocol"))...)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		errs = append(errs, required(m.MountPath, mp.Child("mountPath"))...)
	}
	// terminationMessagePolicy as kube-apiserver (terminationMessagePath, like upstream, is not checked:
	// the kubelet takes a relative one from /).
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(p.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]string{string(corev1.TerminationMessageReadFile), string(corev1.TerminationMessageFallbackToLogsOnError)}))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	// Plain init containers run to completion, so they may not have lifecycle probes (sidecars, with
	// restartPolicy Always, may).
	sidecar := init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	for _, pr := range []struct {
		probe     *corev1.Probe
		name      string
		readiness bool
	}{{c.LivenessProbe, "livenessProbe", false}, {c.ReadinessProbe, "readinessProbe", true}, {c.StartupProbe, "startupProbe", false}} {
		if pr.probe == nil {
			continue
		}
		if init && !sidecar {
			errs = append(errs, field.Forbidden(p.Child(pr.name), "may not be set for init containers"))
			continue
		}
		errs = append(errs, Probe(pr.probe, p.Child(pr.name), c, pr.readiness)...)
		if !pr.readiness && pr.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(p.Child(pr.name, "successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

// Probe validates a probe: exactly one handler, ports in 1-65535 (or a named container port),
// timeoutSeconds/periodSeconds/successThreshold/failureThreshold >= 1, initialDelaySeconds >= 0 and
// terminationGracePeriodSeconds > 0 when set.
func Probe(pr *corev1.Probe, p *field.Path, c *corev1.Container, readiness bool) field.ErrorList {
	var errs field.ErrorList
	n := 0
	h := pr.ProbeHandler
	if h.Exec != nil {
		n++
		if len(h.Exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h.HTTPGet != nil {
		n++
		errs = append(errs, probePort(h.HTTPGet.Port, p.Child("httpGet", "port"), c)...)
		if h.HTTPGet.Scheme != corev1.URISchemeHTTP && h.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("httpGet", "scheme"), h.HTTPGet.Scheme, []string{"HTTP", "HTTPS"}))
		}
	}
	if h.TCPSocket != nil {
		n++
		errs = append(errs, probePort(h.TCPSocket.Port, p.Child("tcpSocket", "port"), c)...)
	}
	if h.GRPC != nil {
		n++
		errs = append(errs, portNumber(h.GRPC.Port, p.Child("grpc", "port"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type (exec, httpGet, tcpSocket or grpc)"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	for _, f := range []struct {
		v    int32
		name string
		min  int32
	}{{pr.InitialDelaySeconds, "initialDelaySeconds", 0}, {pr.TimeoutSeconds, "timeoutSeconds", 1},
		{pr.PeriodSeconds, "periodSeconds", 1}, {pr.SuccessThreshold, "successThreshold", 1}, {pr.FailureThreshold, "failureThreshold", 1}} {
		if f.v < f.min {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, fmt.Sprintf("must be greater than or equal to %d", f.min)))
		}
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		if readiness {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		} else if *g <= 0 {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

func probePort(port intstr.IntOrString, p *field.Path, c *corev1.Container) field.ErrorList {
	if port.Type == intstr.Int {
		return portNumber(port.IntVal, p)
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		return field.ErrorList{field.Invalid(p, port.StrVal, msg)}
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(p, port.StrVal, "must be the name of a container port")}
}

func dnsLabel(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}
