package proxyhandler

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestSplitID(t *testing.T) {
	for id, want := range map[string][3]string{
		"p": {"", "p", ""}, "p:8080": {"", "p", "8080"}, "https:p:443": {"https", "p", "443"}, "http:p:web": {"http", "p", "web"},
	} {
		s, n, p, err := SplitID("pod", id)
		if err != nil || [3]string{s, n, p} != want {
			t.Errorf("SplitID(%q) = %q %q %q, %v; want %v", id, s, n, p, err, want)
		}
	}
	for _, id := range []string{"a:b:c:d", "ftp:p:80", ":80", ""} {
		if _, _, _, err := SplitID("service", id); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `invalid service request "`+id+`"`) {
			t.Errorf("SplitID(%q): %v, want 400 invalid service request", id, err)
		}
	}
}

func TestCheckIP(t *testing.T) {
	for _, ip := range []string{"10.244.1.5", "192.168.0.1", "fd00::5"} {
		if err := CheckIP(ip); err != nil {
			t.Errorf("CheckIP(%s): %v", ip, err)
		}
	}
	for _, ip := range []string{"", "127.0.0.1", "::1", "169.254.169.254", "0.0.0.0", "224.0.0.1", "node-a"} {
		if err := CheckIP(ip); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "address not allowed") {
			t.Errorf("CheckIP(%q): %v, want 400 address not allowed", ip, err)
		}
	}
}
