package crictl

import (
	"strings"
	"testing"
)

func TestMatchPrefix(t *testing.T) {
	all := []candidate{
		{"abc111", "default/web (Ready)"},
		{"abc222", "default/db (NotReady)"},
		{"def333", "kube-system/dns (Ready)"},
	}
	if id, err := matchPrefix("pod sandbox", "def", all); err != nil || id != "def333" {
		t.Errorf("unique prefix: %q %v", id, err)
	}
	if id, err := matchPrefix("pod sandbox", "abc111", all); err != nil || id != "abc111" {
		t.Errorf("full ID: %q %v", id, err)
	}
	_, err := matchPrefix("pod sandbox", "zz", all)
	if err == nil || err.Error() != `no pod sandbox with ID prefix "zz"` {
		t.Errorf("unknown prefix: %v", err)
	}
	_, err = matchPrefix("container", "abc", all)
	if err == nil {
		t.Fatal("ambiguous prefix: want an error")
	}
	for _, w := range []string{`ID prefix "abc" is ambiguous, it matches 2 containers`, "abc111  default/web (Ready)", "abc222  default/db (NotReady)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("ambiguous error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "def333") {
		t.Errorf("ambiguous error lists a non-match: %v", err)
	}
	if _, err := matchPrefix("container", "", all); err == nil {
		t.Error("empty prefix: want an error")
	}
}
