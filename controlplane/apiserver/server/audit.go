package server

import (
	"errors"
	"fmt"

	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
)

// applyAudit sets up kube-apiserver's audit log on cfg with k8s.io/apiserver's audit options: the
// policy (audit.k8s.io/v1 Policy, --audit-policy-file) decides per request at which level and stages
// an event is recorded, and the log backend writes them as JSON lines (audit.k8s.io/v1 Event) to
// --audit-log-path ("-" is standard output), rotated by size (MB), age (days) and backup count as
// lumberjack does. Every event carries the authorizer's decision and reason as the annotations
// authorization.k8s.io/decision (allow, forbid) and authorization.k8s.io/reason. No policy and no path:
// no audit. A path without a policy is refused (no event would ever be written); errors name the file.
func applyAudit(o Options, cfg *genericapiserver.Config) error {
	if o.AuditPolicyFile == "" {
		if o.AuditLogPath != "" {
			return errors.New("apiserver: --audit-log-path needs --audit-policy-file: without a policy no event is logged")
		}
		return nil
	}
	a := genericoptions.NewAuditOptions()
	a.PolicyFile = o.AuditPolicyFile
	a.LogOptions.Path = o.AuditLogPath
	a.LogOptions.MaxAge, a.LogOptions.MaxBackups, a.LogOptions.MaxSize = o.AuditLogMaxAge, o.AuditLogMaxBackup, o.AuditLogMaxSize
	if errs := a.Validate(); len(errs) > 0 {
		return fmt.Errorf("apiserver: audit: %w", errors.Join(errs...))
	}
	if err := a.ApplyTo(cfg); err != nil {
		return fmt.Errorf("apiserver: --audit-policy-file %s: %w", o.AuditPolicyFile, err)
	}
	return nil
}
