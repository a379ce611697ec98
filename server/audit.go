package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultAuditPolicy is the audit.k8s.io/v1 Policy WithDefaultAudit turns on: every request at the
// Metadata level (who, what, when, the response code and the authorizer's decision and reason; never
// a body, so no Secret's data), once it is answered, except the routine reads and renewals of the
// system's own components and the health probes, which would drown the rest.
const DefaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [system:kube-scheduler, system:kube-controller-manager, system:apiserver, system:kube-proxy]
  verbs: [get, list, watch]
- level: None
  userGroups: [system:nodes]
  verbs: [get, list, watch]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  verbs: [get, update, patch]
- level: None
  nonResourceURLs: [/healthz*, /readyz*, /livez*, /version]
- level: Metadata
`

// Default rotation of the audit log WithDefaultAudit sets up (kube-apiserver's --audit-log-maxsize in
// MB, --audit-log-maxbackup, --audit-log-maxage in days).
const (
	DefaultAuditLogMaxSize   = 100
	DefaultAuditLogMaxBackup = 5
	DefaultAuditLogMaxAge    = 30
)

// WithDefaultAudit returns c with the audit log on, unless c names an audit policy already: the
// policy Paths().AuditPolicy (which Run creates with DefaultAuditPolicy when it is missing, and keeps
// when you edit it) and the log Paths().AuditLog, rotated at the defaults above. `nodekit up` and
// `nodekit lab` run their servers so.
func (c Config) WithDefaultAudit() Config {
	if c.APIServer.AuditPolicyFile != "" {
		return c
	}
	p := c.Paths()
	a := &c.APIServer
	a.AuditPolicyFile, a.AuditLogPath = p.AuditPolicy, p.AuditLog
	a.AuditLogMaxSize, a.AuditLogMaxBackup, a.AuditLogMaxAge = DefaultAuditLogMaxSize, DefaultAuditLogMaxBackup, DefaultAuditLogMaxAge
	return c
}

// ensureDefaultAuditPolicy writes DefaultAuditPolicy to path (0600) if nothing is there yet.
func ensureDefaultAuditPolicy(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("server: audit policy: %w", err)
	}
	if err := os.WriteFile(path, []byte(DefaultAuditPolicy), 0o600); err != nil {
		return fmt.Errorf("server: audit policy: %w", err)
	}
	return nil
}
