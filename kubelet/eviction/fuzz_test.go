package eviction

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseThresholds feeds arbitrary evictionHard / evictionSoft / grace period / minimum reclaim
// values (from the KubeletConfiguration file) to ParseThresholds. Properties: it never panics; errors
// name the field; an accepted value is a non-negative quantity or a percentage in 0-100 (never NaN), and
// its String form parses back to the same value.
func FuzzParseThresholds(f *testing.F) {
	for _, v := range []string{"100Mi", "10%", "0.5%", "0%", "100%", "-1", "NaN%", "Inf%", "1e3%", "1E", "9223372036854775807", "99999999999999999999Ei", " 5% ", ""} {
		f.Add(v, "1m30s", "5%")
	}
	f.Fuzz(func(t *testing.T, value, grace, reclaim string) {
		sig := string(SignalMemoryAvailable)
		th, err := ParseThresholds(map[string]string{sig: value}, map[string]string{string(SignalNodeFsAvailable): value},
			map[string]string{string(SignalNodeFsAvailable): grace}, map[string]string{sig: reclaim})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "eviction") {
				t.Fatalf("error %q does not name the field", err)
			}
			return
		}
		for _, x := range th {
			for _, v := range []Value{x.Value, x.MinReclaim} {
				if v.Quantity == nil && (math.IsNaN(v.Percentage) || v.Percentage < 0 || v.Percentage > 1) {
					t.Fatalf("%v: percentage %v accepted", x, v.Percentage)
				}
				if v.Quantity != nil && v.Quantity.Sign() < 0 {
					t.Fatalf("%v: negative quantity accepted", x)
				}
				if v.Quantity == nil && v.Percentage == 0 {
					continue // the zero MinReclaim
				}
				back, err := parseValue(v.String())
				if err != nil {
					t.Fatalf("%v: String %q does not parse back: %v", x, v.String(), err)
				}
				if v.Quantity != nil {
					if back.Quantity == nil || back.Quantity.Cmp(*v.Quantity) != 0 {
						t.Fatalf("%v: quantity %q parses back to %v", x, v.String(), back)
					}
				} else if back.Quantity != nil || math.Abs(back.Percentage-v.Percentage) > 1e-12*v.Percentage {
					t.Fatalf("%v: percentage %q parses back to %v", x, v.String(), back)
				}
			}
		}
	})
}
