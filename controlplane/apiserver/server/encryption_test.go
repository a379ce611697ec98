package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestLoadEncryptionBadFiles: a missing, undecodable or invalid EncryptionConfiguration is refused with
// an error naming the file and the field at fault (upstream's validation messages); a good one gives
// secrets a transformer.
func TestLoadEncryptionBadFiles(t *testing.T) {
	dir := t.TempDir()
	head := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n"
	cases := map[string]struct{ body, want string }{
		"short key": {head + "  - aescbc:\n      keys:\n      - name: k1\n        secret: c2hvcnQ=\n",
			"resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"},
		"no key name": {head + "  - secretbox:\n      keys:\n      - secret: MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=\n",
			"resources[0].providers[0].secretbox.keys[0].name: Required value"},
		"no providers": {strings.Replace(head, "providers:", "providers: []", 1), "resources[0].providers: Required value"},
		"not base64":   {head + "  - aescbc:\n      keys:\n      - name: k1\n        secret: '%%%'\n", "resources[0].providers[0].aescbc.keys[0].secret"},
		"wrong kind":   {"apiVersion: v1\nkind: ConfigMap\n", "error decoding encryption provider configuration file"},
		"kms":          {head + "  - kms:\n      apiVersion: v2\n      name: plugin\n      endpoint: unix:///tmp/kms.sock\n", "resources[0].providers[0].kms: Unsupported value"},
		"missing file": {"", "no such file"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if name != "missing file" {
			if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := loadEncryption(p)
		if err == nil {
			t.Errorf("%s: loaded, want refused", name)
			continue
		}
		if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to name %s and say %q", name, err, p, c.want)
		}
	}
	good := filepath.Join(dir, "good.yaml")
	body := head + "  - aesgcm:\n      keys:\n      - name: k1\n        secret: MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=\n  - identity: {}\n"
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := loadEncryption(good)
	if err != nil || tr.TransformerForResource(schema.GroupResource{Resource: "secrets"}) == nil {
		t.Fatalf("good file: %v %v", tr, err)
	}
}
