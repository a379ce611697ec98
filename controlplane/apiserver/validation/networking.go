package validation

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationIngressClass is the deprecated annotation naming an Ingress's class; when it and
// spec.ingressClassName are both set on create they must match (upstream ValidateIngressCreate).
const AnnotationIngressClass = "kubernetes.io/ingress.class"

var (
	ingressPathTypes     = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
	ingressClassScopes   = []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}
	policyTypes          = sets.New(string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress))
)

// NetworkPolicy validates a networking.k8s.io/v1 NetworkPolicy as upstream ValidateNetworkPolicy: a valid
// podSelector; every rule's ports (protocol TCP, UDP or SCTP; a port number 1-65535 or an IANA port name;
// endPort only with a numeric port and not below it) and peers (exactly one of podSelector/namespaceSelector
// or an ipBlock alone, whose cidr is valid and whose except entries are strict subsets of it); at most two
// policyTypes, each Ingress or Egress. old is the stored object on update (nil on create): CIDRs it already
// holds are accepted unchanged, as upstream.
func NetworkPolicy(np, old *networkingv1.NetworkPolicy) field.ErrorList {
	errs := Subdomain(&np.ObjectMeta)
	var oldCIDRs []string
	if old != nil {
		for _, peers := range policyPeers(&old.Spec) {
			for _, p := range peers {
				if p.IPBlock != nil {
					oldCIDRs = append(append(oldCIDRs, p.IPBlock.CIDR), p.IPBlock.Except...)
				}
			}
		}
	}
	s := &np.Spec
	errs = append(errs, metav1validation.ValidateLabelSelector(&s.PodSelector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("podSelector"))...)
	for i, r := range s.Ingress {
		rp := specPath.Child("ingress").Index(i)
		errs = append(errs, policyPorts(r.Ports, rp.Child("ports"))...)
		for j := range r.From {
			errs = append(errs, policyPeer(&r.From[j], oldCIDRs, rp.Child("from").Index(j))...)
		}
	}
	for i, r := range s.Egress {
		rp := specPath.Child("egress").Index(i)
		errs = append(errs, policyPorts(r.Ports, rp.Child("ports"))...)
		for j := range r.To {
			errs = append(errs, policyPeer(&r.To[j], oldCIDRs, rp.Child("to").Index(j))...)
		}
	}
	if len(s.PolicyTypes) > policyTypes.Len() {
		return append(errs, field.Invalid(specPath.Child("policyTypes"), &s.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range s.PolicyTypes {
		if !policyTypes.Has(string(t)) {
			errs = append(errs, field.NotSupported(specPath.Child("policyTypes").Index(i), t,
				[]string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}))
		}
	}
	return errs
}

func policyPeers(s *networkingv1.NetworkPolicySpec) [][]networkingv1.NetworkPolicyPeer {
	var out [][]networkingv1.NetworkPolicyPeer
	for _, r := range s.Ingress {
		out = append(out, r.From)
	}
	for _, r := range s.Egress {
		out = append(out, r.To)
	}
	return out
}

func policyPorts(ports []networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		pp := p.Index(i)
		if port.Protocol != nil && !protocols.Has(string(*port.Protocol)) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), *port.Protocol,
				[]string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
		}
		switch {
		case port.Port == nil:
			if port.EndPort != nil {
				errs = append(errs, field.Invalid(pp.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
			}
		case port.Port.Type == intstr.Int:
			errs = append(errs, portNumber(port.Port.IntVal, pp.Child("port"))...)
			if port.EndPort != nil {
				if *port.EndPort < port.Port.IntVal {
					errs = append(errs, field.Invalid(pp.Child("endPort"), *port.EndPort, "must be greater than or equal to `port`"))
				}
				errs = append(errs, portNumber(*port.EndPort, pp.Child("endPort"))...)
			}
		default:
			if port.EndPort != nil {
				errs = append(errs, field.Invalid(pp.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
			}
			for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
				errs = append(errs, field.Invalid(pp.Child("port"), port.Port.StrVal, msg))
			}
		}
	}
	return errs
}

func policyPeer(peer *networkingv1.NetworkPolicyPeer, oldCIDRs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, ipBlock(peer.IPBlock, oldCIDRs, p.Child("ipBlock"))...)
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a peer"))
	} else if n > 1 && peer.IPBlock != nil {
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return errs
}

// ipBlock checks an ipBlock's cidr and except entries with the legacy CIDR rule in its strict form
// (upstream's StrictIPCIDRValidation, on by default since 1.36); each except must lie strictly inside cidr.
func ipBlock(b *networkingv1.IPBlock, oldCIDRs []string, p *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	errs := validation.IsValidCIDRForLegacyField(p.Child("cidr"), b.CIDR, true, oldCIDRs)
	_, outer, err := net.ParseCIDR(b.CIDR)
	if err != nil {
		return errs
	}
	for i, e := range b.Except {
		ep := p.Child("except").Index(i)
		errs = append(errs, validation.IsValidCIDRForLegacyField(ep, e, true, oldCIDRs)...)
		_, inner, err := net.ParseCIDR(e)
		if err != nil {
			continue
		}
		outerLen, _ := outer.Mask.Size()
		innerLen, _ := inner.Mask.Size()
		if !outer.Contains(inner.IP) || outerLen >= innerLen {
			errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// Ingress validates a networking.k8s.io/v1 Ingress as upstream ValidateIngressCreate/Update: a
// defaultBackend or rules; hosts DNS names (a leading "*." wildcard allowed), never IP addresses; every
// HTTP path has a pathType (Exact and Prefix paths absolute without "//", "/./", "/../", "%2f" or a
// trailing "/.." or "/."); every backend exactly one of service (a DNS-label name and a port name or
// number) and resource; tls hosts DNS names and secretName a Secret name; ingressClassName a DNS
// subdomain. On create (old nil) the kubernetes.io/ingress.class annotation must match ingressClassName
// when both are set.
func Ingress(ing, old *networkingv1.Ingress) field.ErrorList {
	errs := Subdomain(&ing.ObjectMeta)
	if old == nil {
		if v, ok := ing.Annotations[AnnotationIngressClass]; ok && ing.Spec.IngressClassName != nil && v != *ing.Spec.IngressClassName {
			errs = append(errs, field.Invalid(field.NewPath("annotations").Child(AnnotationIngressClass), v, "must match `ingressClassName` when both are specified"))
		}
	}
	s := &ing.Spec
	if len(s.Rules) == 0 && s.DefaultBackend == nil {
		errs = append(errs, field.Invalid(specPath, s.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if s.DefaultBackend != nil {
		errs = append(errs, ingressBackend(s.DefaultBackend, specPath.Child("defaultBackend"))...)
	}
	for i, r := range s.Rules {
		rp := specPath.Child("rules").Index(i)
		if r.Host != "" {
			errs = append(errs, ingressHost(r.Host, rp.Child("host"), true)...)
		}
		if r.HTTP == nil {
			continue
		}
		hp := rp.Child("http")
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(hp.Child("paths"), ""))
		}
		for j := range r.HTTP.Paths {
			errs = append(errs, ingressPath(&r.HTTP.Paths[j], hp.Child("paths").Index(j))...)
		}
	}
	for i, t := range s.TLS {
		tp := specPath.Child("tls").Index(i)
		for j, h := range t.Hosts {
			errs = append(errs, ingressHost(h, tp.Child("hosts").Index(j), false)...)
		}
		if t.SecretName != "" {
			errs = append(errs, dnsSubdomain(t.SecretName, tp.Child("secretName"))...)
		}
	}
	if s.IngressClassName != nil {
		errs = append(errs, dnsSubdomain(*s.IngressClassName, specPath.Child("ingressClassName"))...)
	}
	return errs
}

func ingressHost(h string, p *field.Path, rejectIP bool) field.ErrorList {
	var errs field.ErrorList
	if rejectIP && net.ParseIP(h) != nil {
		errs = append(errs, field.Invalid(p, h, "must be a DNS name, not an IP address"))
	}
	check := validation.IsDNS1123Subdomain
	if strings.Contains(h, "*") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	for _, msg := range check(h) {
		errs = append(errs, field.Invalid(p, h, msg))
	}
	return errs
}

func ingressPath(path *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.PathType == nil {
		return field.ErrorList{field.Required(p.Child("pathType"), "pathType must be specified")}
	}
	switch *path.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(path.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(path.Path, seq) {
				errs = append(errs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suf := range invalidPathSuffixes {
			if strings.HasSuffix(path.Path, suf) {
				errs = append(errs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("cannot end with '%s'", suf)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if path.Path != "" && !strings.HasPrefix(path.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("pathType"), *path.PathType, ingressPathTypes))
	}
	return append(errs, ingressBackend(&path.Backend, p.Child("backend"))...)
}

// ingressBackend: the Service name is a DNS label (upstream's RelaxedServiceNameValidation, GA in 1.37).
func ingressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(p, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		errs = append(errs, typedReference(b.Resource.APIGroup, b.Resource.Kind, b.Resource.Name, p.Child("resource"))...)
	case b.Service != nil:
		sp := p.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			for _, msg := range apivalidation.NameIsDNSLabel(b.Service.Name, false) {
				errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Name, msg))
			}
		}
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
		case port.Name != "":
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), port.Name, msg))
			}
		case port.Number != 0:
			errs = append(errs, portNumber(port.Number, sp.Child("port", "number"))...)
		default:
			errs = append(errs, field.Required(p, "port name or number is required"))
		}
	default:
		errs = append(errs, field.Invalid(p, "", "resource or service backend is required"))
	}
	return errs
}

// typedReference checks a reference to an object of another API (an Ingress's resource backend, an
// IngressClass's parameters): an optional DNS-subdomain apiGroup, a kind and a name that are path segments.
func typedReference(apiGroup *string, kind, name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if apiGroup != nil {
		errs = append(errs, dnsSubdomain(*apiGroup, p.Child("apiGroup"))...)
	}
	errs = append(errs, pathSegment(kind, p.Child("kind"))...)
	return append(errs, pathSegment(name, p.Child("name"))...)
}

// pathSegment requires s and checks it can be a path segment (not "." or "..", no "/" or "%").
func pathSegment(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

// IngressStatus validates an Ingress's status on /status updates: load-balancer IPs valid (those the
// stored status already holds accepted unchanged) and hostnames DNS names, not IP addresses.
func IngressStatus(ing, old *networkingv1.Ingress) field.ErrorList {
	var errs field.ErrorList
	var oldIPs []string
	for _, i := range old.Status.LoadBalancer.Ingress {
		if i.IP != "" {
			oldIPs = append(oldIPs, i.IP)
		}
	}
	for i, lb := range ing.Status.LoadBalancer.Ingress {
		p := field.NewPath("status", "loadBalancer", "ingress").Index(i)
		if lb.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), lb.IP, true, oldIPs)...)
		}
		if lb.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(lb.Hostname) {
				errs = append(errs, field.Invalid(p.Child("hostname"), lb.Hostname, msg))
			}
			if net.ParseIP(lb.Hostname) != nil {
				errs = append(errs, field.Invalid(p.Child("hostname"), lb.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

// IngressClass validates a networking.k8s.io/v1 IngressClass as upstream ValidateIngressClass: controller
// a domain-prefixed path of at most 250 characters; parameters, when set, name a kind and an object
// (path segments), an optional DNS-subdomain apiGroup, and a scope, Cluster (no namespace) or Namespace
// (with a namespace). On update (old non-nil) controller is immutable.
func IngressClass(ic, old *networkingv1.IngressClass) field.ErrorList {
	errs := Subdomain(&ic.ObjectMeta)
	cp := specPath.Child("controller")
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(ic.Spec.Controller, old.Spec.Controller, cp)...)
	}
	if len(ic.Spec.Controller) > 250 {
		errs = append(errs, field.TooLong(cp, "", 250))
	}
	errs = append(errs, validation.IsDomainPrefixedPath(cp, ic.Spec.Controller)...)
	params := ic.Spec.Parameters
	if params == nil {
		return errs
	}
	pp := specPath.Child("parameters")
	errs = append(errs, typedReference(params.APIGroup, params.Kind, params.Name, pp)...)
	switch {
	case params.Scope == nil:
		errs = append(errs, field.Required(pp.Child("scope"), ""))
	case *params.Scope == networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			errs = append(errs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range apivalidation.ValidateNamespaceName(*params.Namespace, false) {
				errs = append(errs, field.Invalid(pp.Child("namespace"), *params.Namespace, msg))
			}
		}
	case *params.Scope == networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(pp.Child("scope"), *params.Scope, ingressClassScopes))
	}
	return errs
}
