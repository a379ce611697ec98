package server

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/audit/policy"
)

// TestWithDefaultAudit: the default policy is a valid audit.k8s.io/v1 Policy, WithDefaultAudit points
// the API server at the data dir's policy and log (and keeps a policy the config names), and the
// policy file is written once, 0600, and left alone when it exists.
func TestWithDefaultAudit(t *testing.T) {
	if p, err := policy.LoadPolicyFromBytes([]byte(DefaultAuditPolicy)); err != nil || len(p.Rules) != 5 {
		t.Fatalf("DefaultAuditPolicy: %v, %v", p, err)
	}
	c := Config{DataDir: t.TempDir()}.WithDefaultAudit()
	p := c.Paths()
	if a := c.APIServer; a.AuditPolicyFile != p.AuditPolicy || a.AuditLogPath != p.AuditLog || a.AuditLogMaxSize != 100 {
		t.Fatalf("WithDefaultAudit: %+v", a)
	}
	// `nodekit up` passes it on as flags: the same settings come back from the command line.
	args := strings.Join(c.FlagArgs(), " ")
	for _, want := range []string{"--audit-policy-file=" + p.AuditPolicy, "--audit-log-path=" + p.AuditLog, "--audit-log-maxsize=100",
		"--audit-log-maxbackup=5", "--audit-log-maxage=30"} {
		if !strings.Contains(args, want) {
			t.Errorf("FlagArgs() = %s, want %s", args, want)
		}
	}
	own := Config{DataDir: c.DataDir}
	own.APIServer.AuditPolicyFile = "/etc/mine.yaml"
	if a := own.WithDefaultAudit().APIServer; a.AuditPolicyFile != "/etc/mine.yaml" || a.AuditLogPath != "" {
		t.Fatalf("WithDefaultAudit replaced the config's own policy: %+v", a)
	}
	if err := ensureDefaultAuditPolicy(p.AuditPolicy); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p.AuditPolicy); err != nil || string(b) != DefaultAuditPolicy {
		t.Fatalf("policy file: %v %q", err, b)
	}
	if fi, _ := os.Stat(p.AuditPolicy); fi.Mode().Perm() != 0o600 {
		t.Errorf("policy file mode %v, want 0600", fi.Mode())
	}
	if err := os.WriteFile(p.AuditPolicy, []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureDefaultAuditPolicy(p.AuditPolicy); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p.AuditPolicy); string(b) != "edited" {
		t.Errorf("an edited policy was overwritten: %q", b)
	}
}
