package validation

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var serviceTypes = []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}

// Service validates a service: a DNS-1035 label name, a supported type, ports (1-65535, unique names and
// named when more than one, protocol, nodePort only for NodePort/LoadBalancer), the selector's labels,
// sessionAffinity and clusterIP ("None" or an IP address; not "None" for NodePort/LoadBalancer). As in Kubernetes, a port/protocol pair and a
// nodePort/protocol pair may each appear only once (field.Duplicate on spec.ports[i] / .nodePort).
func Service(svc *corev1.Service) field.ErrorList {
	errs := Name(&svc.ObjectMeta, apivalidation.NameIsDNS1035Label)
	s := &svc.Spec
	switch s.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Ports) == 0 && s.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(specPath.Child("ports"), ""))
		}
	case corev1.ServiceTypeExternalName:
		errs = append(errs, required(s.ExternalName, specPath.Child("externalName"))...)
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), s.Type, serviceTypes))
	}
	names := sets.New[string]()
	type key struct {
		proto corev1.Protocol
		port  int32
	}
	ports, nodePorts := sets.New[key](), sets.New[key]()
	for i, port := range s.Ports {
		p := specPath.Child("ports").Index(i)
		if len(s.Ports) > 1 {
			errs = append(errs, dnsLabel(port.Name, p.Child("name"))...)
		}
		if port.Name != "" {
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		errs = append(errs, portNumber(port.Port, p.Child("port"))...)
		errs = append(errs, protocol(port.Protocol, p.Child("protocol"))...)
		if k := (key{port.Protocol, port.Port}); ports.Has(k) {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%d/%s", port.Port, port.Protocol)))
		} else {
			ports.Insert(k)
		}
		if port.NodePort != 0 {
			if k := (key{port.Protocol, port.NodePort}); nodePorts.Has(k) {
				errs = append(errs, field.Duplicate(p.Child("nodePort"), port.NodePort))
			} else {
				nodePorts.Insert(k)
			}
			if s.Type != corev1.ServiceTypeNodePort && s.Type != corev1.ServiceTypeLoadBalancer {
				errs = append(errs, field.Forbidden(p.Child("nodePort"), "may not be used when `type` is '"+string(s.Type)+"'"))
			}
			errs = append(errs, portNumber(port.NodePort, p.Child("nodePort"))...)
		}
		if port.TargetPort.StrVal != "" {
			for _, msg := range validation.IsValidPortName(port.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(p.Child("targetPort"), port.TargetPort.StrVal, msg))
			}
		} else if port.TargetPort.IntVal != 0 {
			errs = append(errs, portNumber(port.TargetPort.IntVal, p.Child("targetPort"))...)
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Selector, specPath.Child("selector"))...)
	if s.SessionAffinity != corev1.ServiceAffinityNone && s.SessionAffinity != corev1.ServiceAffinityClientIP {
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), s.SessionAffinity, []string{"None", "ClientIP"}))
	}
	if s.Type == corev1.ServiceTypeExternalName && s.ClusterIP != "" && s.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
	}
	if s.ClusterIP == corev1.ClusterIPNone && (s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer) {
		errs = append(errs, field.Invalid(specPath.Child("clusterIP"), s.ClusterIP, "may not be set to 'None' for "+string(s.Type)+" services"))
	}
	if s.ClusterIP != "" && s.ClusterIP != corev1.ClusterIPNone && net.ParseIP(s.ClusterIP) == nil {
		errs = append(errs, field.Invalid(specPath.Child("clusterIP"), s.ClusterIP, "must be empty, 'None', or a valid IP address"))
	}
	return errs
}

// ServiceUpdate validates an update: clusterIP may not change once set.
func ServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := Service(svc)
	if old.Spec.ClusterIP != "" && svc.Spec.ClusterIP != old.Spec.ClusterIP && svc.Spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Invalid(specPath.Child("clusterIP"), svc.Spec.ClusterIP, "field is immutable"))
	}
	return errs
}
