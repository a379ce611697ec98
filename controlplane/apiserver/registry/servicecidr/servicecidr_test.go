package servicecidr

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestValidateCreate admits only the default ServiceCIDR over the configured range and names the reason
// (the configured range and the flag) in every refusal.
func TestValidateCreate(t *testing.T) {
	const cidr = "10.96.0.0/12"
	for _, tc := range []struct {
		name  string
		cidrs []string
		field string // "" = accepted
	}{
		{"kubernetes", []string{cidr}, ""},
		{"extra", []string{"10.200.0.0/16"}, "metadata.name"},
		{"extra", []string{cidr}, "metadata.name"},
		{"kubernetes", []string{"10.200.0.0/16"}, "spec.cidrs"},
		{"kubernetes", []string{cidr, "fd00::/108"}, "spec.cidrs"},
		{"kubernetes", nil, "spec.cidrs"},
	} {
		errs := validateCreate(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: tc.cidrs}}, cidr)
		switch {
		case tc.field == "" && len(errs) != 0:
			t.Errorf("%s %v: want accepted, got %v", tc.name, tc.cidrs, errs)
		case tc.field != "" && (len(errs) != 1 || errs[0].Field != tc.field):
			t.Errorf("%s %v: want one error on %s, got %v", tc.name, tc.cidrs, tc.field, errs)
		case tc.field != "" && !strings.Contains(errs[0].Error(), "--service-cluster-ip-range "+cidr):
			t.Errorf("%s %v: the error does not name the configured range: %v", tc.name, tc.cidrs, errs)
		}
	}
}
