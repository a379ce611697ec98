package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestSysctls: upstream's "should reject invalid sysctls" conformance spec's names ("foo-", "bar..")
// are refused naming the field, the well-formed ones pass, and namespaced sysctls clash with
// hostNetwork/hostIPC.
func TestSysctls(t *testing.T) {
	spec := func(host bool, names ...string) *corev1.PodSpec {
		s := &corev1.PodSpec{HostNetwork: host, HostIPC: host, SecurityContext: &corev1.PodSecurityContext{}}
		for _, n := range names {
			s.SecurityContext.Sysctls = append(s.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
		return s
	}
	p := field.NewPath("spec")
	for _, tc := range []struct {
		spec *corev1.PodSpec
		want []string // substrings of the joined errors; none: valid
	}{
		{spec(false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "kernel/shmmax", "safe-and-unsafe"), nil},
		{spec(false, "foo-", "kernel.shmmax", "bar.."), []string{`spec.securityContext.sysctls[0].name: Invalid value: "foo-"`, `spec.securityContext.sysctls[2].name: Invalid value: "bar.."`}},
		{spec(false, "kernel.shmmax", "kernel.shmmax"), []string{`spec.securityContext.sysctls[1].name: Duplicate value: "kernel.shmmax"`}},
		{spec(false, ""), []string{"spec.securityContext.sysctls[0].name: Required value"}},
		{spec(true, "net.core.somaxconn", "kernel.shmmax"), []string{"may not be specified when 'hostNetwork' is true", "may not be specified when 'hostIPC' is true"}},
	} {
		errs := sysctls(tc.spec, p)
		got := errs.ToAggregate()
		if len(tc.want) == 0 {
			if got != nil {
				t.Errorf("%+v: %v, want valid", tc.spec.SecurityContext.Sysctls, got)
			}
			continue
		}
		if got == nil || len(errs) != len(tc.want) {
			t.Errorf("%+v: %v, want %d errors %q", tc.spec.SecurityContext.Sysctls, got, len(tc.want), tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%+v: %v, want %q", tc.spec.SecurityContext.Sysctls, got, w)
			}
		}
	}
}
