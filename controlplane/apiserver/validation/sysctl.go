package validation

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/node/util/sysctl"
)

// sysctlMaxLength and sysctlName are upstream's rules for a sysctl name (pkg/apis/core/validation): at
// most 253 characters, segments of [a-z0-9] with inner '-' or '_', separated by '.' or '/'.
const sysctlMaxLength = 253

var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// sysctls validates spec.securityContext.sysctls as kube-apiserver does: each name required, well
// formed and not repeated, and no net.* sysctl with hostNetwork nor IPC one with hostIPC (they would
// change the node's own namespaces). Errors name securityContext.sysctls[i].name under p.
func sysctls(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	if s.SecurityContext == nil {
		return nil
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, sc := range s.SecurityContext.Sysctls {
		np := p.Child("securityContext", "sysctls").Index(i).Child("name")
		switch {
		case sc.Name == "":
			errs = append(errs, field.Required(np, ""))
		case len(sc.Name) > sysctlMaxLength || !sysctlName.MatchString(sc.Name):
			errs = append(errs, field.Invalid(np, sc.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case seen[sc.Name]:
			errs = append(errs, field.Duplicate(np, sc.Name))
		}
		seen[sc.Name] = true
		switch ns, _, _ := sysctl.GetNamespace(sc.Name); {
		case s.HostNetwork && ns == sysctl.NetNamespace:
			errs = append(errs, field.Invalid(np, sc.Name, "may not be specified when 'hostNetwork' is true"))
		case s.HostIPC && ns == sysctl.IPCNamespace:
			errs = append(errs, field.Invalid(np, sc.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}
