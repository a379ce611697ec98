package validation

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ephemeralForbidden is upstream's refusal of a field an ephemeral container may not set.
const ephemeralForbidden = "cannot be set for an Ephemeral Container"

// PodCreate validates a new pod: Pod, and no ephemeral containers (they are added later, through
// pods/ephemeralcontainers, as kube-apiserver's ValidatePodCreate requires).
func PodCreate(p *corev1.Pod) field.ErrorList {
	errs := Pod(p)
	if len(p.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	return errs
}

// PodEphemeralContainersUpdate validates an update through pods/ephemeralcontainers (kube-apiserver's
// ValidatePodEphemeralContainersUpdate): the new pod is valid (its new ephemeral containers included),
// a mirror pod takes none, and existing ephemeral containers are neither removed nor changed (compared
// by name, as a patch does not keep the order).
func PodEphemeralContainersUpdate(p, old *corev1.Pod) field.ErrorList {
	errs := Pod(p)
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range p.Spec.EphemeralContainers {
		byName[p.Spec.EphemeralContainers[i].Name] = &p.Spec.EphemeralContainers[i]
	}
	ep := specPath.Child("ephemeralContainers")
	for _, o := range old.Spec.EphemeralContainers {
		n, ok := byName[o.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(ep, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", o.Name)))
		case !apiequality.Semantic.DeepEqual(o, *n):
			errs = append(errs, field.Forbidden(ep, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", o.Name, cmp.Diff(o, *n))))
		}
	}
	return errs
}

// ephemeralContainers validates spec.ephemeralContainers as kube-apiserver's validateEphemeralContainers:
// each is a container (name unique across all the pod's containers, image, env, volume mounts naming pod
// volumes...) that sets none of the fields that make no sense for a one-off process added to a running
// pod (ports, probes, lifecycle, resources, resizePolicy, restartPolicy), mounts no subPath, and whose
// targetContainerName, when set, names one of the pod's containers or init containers. names holds the
// containers' and init containers' names.
func ephemeralContainers(s *corev1.PodSpec, p *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	targets := names.Clone()
	for i := range s.EphemeralContainers {
		ec := &s.EphemeralContainers[i]
		ip := p.Child("ephemeralContainers").Index(i)
		c := corev1.Container(ec.EphemeralContainerCommon)
		for _, f := range []struct {
			set  bool
			name string
		}{
			{len(c.Ports) > 0, "ports"}, {c.LivenessProbe != nil, "livenessProbe"}, {c.ReadinessProbe != nil, "readinessProbe"},
			{c.StartupProbe != nil, "startupProbe"}, {c.Lifecycle != nil, "lifecycle"},
			{len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0, "resources"},
			{len(c.ResizePolicy) > 0, "resizePolicy"}, {c.RestartPolicy != nil, "restartPolicy"},
			{len(c.RestartPolicyRules) > 0, "restartPolicyRules"},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(ip.Child(f.name), ephemeralForbidden))
			}
		}
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(ip.Child("volumeMounts").Index(j).Child("subPath"), ephemeralForbidden))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(ip.Child("volumeMounts").Index(j).Child("subPathExpr"), ephemeralForbidden))
			}
		}
		// The forbidden fields are reported above; the common checks see the container without them.
		c.Ports, c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil, nil
		errs = append(errs, Container(&c, ip, names, volumes, false)...)
		if t := ec.TargetContainerName; t != "" && !targets.Has(t) {
			errs = append(errs, field.NotFound(ip.Child("targetContainerName"), t))
		}
	}
	return errs
}
