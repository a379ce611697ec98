package server

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodekit/nodekit/controlplane/addons"
	"github.com/nodekit/nodekit/internal/cli"
)

// BindFlags registers `nodekit server`'s flags on fs, bound to c's fields, with c's current values
// as the defaults shown (so bind DefaultConfig). The flag names are kube-apiserver's and
// kube-controller-manager's where those have the setting. Args spells a Config with these same
// bindings, so the two cannot disagree on a name.
func BindFlags(fs *pflag.FlagSet, c *Config) {
	a, e, k := &c.APIServer, &c.Etcd, &c.Controllers
	fs.StringVar(&a.BindAddress, "bind-address", a.BindAddress, "address the API server serves HTTPS on")
	fs.IntVar(&a.Port, "secure-port", a.Port, "API server HTTPS port")
	fs.StringVar(&a.AdvertiseAddress, "advertise-address", a.AdvertiseAddress, "address written to the admin kubeconfig and the kubernetes endpoints (default: first host address)")
	fs.StringSliceVar(&a.ExtraSANs, "tls-san", a.ExtraSANs, "extra IPs or DNS names for the serving certificate")
	fs.StringVar(&a.ServiceCIDR, "service-cluster-ip-range", a.ServiceCIDR, "ClusterIP range")
	fs.StringVar(&a.NodePortRange, "service-node-port-range", a.NodePortRange, "NodePort range")
	fs.StringVar(&a.TokenFile, "token-auth-file", a.TokenFile, "static bearer tokens CSV: token,user,uid,\"group1,group2\"")
	fs.Int64Var(&a.DefaultTolerationSeconds, "default-not-ready-toleration-seconds", a.DefaultTolerationSeconds, "seconds new pods tolerate not-ready/unreachable nodes")
	fs.StringVar(&a.EncryptionProviderConfig, "encryption-provider-config", a.EncryptionProviderConfig, "EncryptionConfiguration file: the resources it lists (secrets) are encrypted in etcd (aescbc, aesgcm, secretbox)")
	fs.StringVar(&a.AuditPolicyFile, "audit-policy-file", a.AuditPolicyFile, "audit.k8s.io/v1 Policy: which requests the audit log records, at which level")
	fs.StringVar(&a.AuditLogPath, "audit-log-path", a.AuditLogPath, "audit log file (JSON lines; - for standard output); needs --audit-policy-file")
	fs.IntVar(&a.AuditLogMaxAge, "audit-log-maxage", a.AuditLogMaxAge, "days to keep rotated audit log files (0: no limit)")
	fs.IntVar(&a.AuditLogMaxBackup, "audit-log-maxbackup", a.AuditLogMaxBackup, "rotated audit log files to keep (0: no limit)")
	fs.IntVar(&a.AuditLogMaxSize, "audit-log-maxsize", a.AuditLogMaxSize, "MB an audit log file reaches before it is rotated (0: never)")
	fs.StringVar(&e.ClientAddr, "etcd-listen-client", e.ClientAddr, "embedded etcd client address (loopback only)")
	fs.StringSliceVar(&e.Servers, "etcd-servers", e.Servers, "external etcd client URLs (no embedded etcd when set)")
	fs.StringVar(&e.CAFile, "etcd-cafile", e.CAFile, "external etcd CA file")
	fs.StringVar(&e.CertFile, "etcd-certfile", e.CertFile, "external etcd client certificate")
	fs.StringVar(&e.KeyFile, "etcd-keyfile", e.KeyFile, "external etcd client key")
	fs.StringVar(&k.ClusterCIDR, "cluster-cidr", k.ClusterCIDR, "pod network range nodes' podCIDRs are cut from")
	fs.IntVar(&k.NodeCIDRMaskSize, "node-cidr-mask-size", k.NodeCIDRMaskSize, "prefix length of each node's podCIDR")
	fs.DurationVar(&k.NodeMonitorGracePeriod, "node-monitor-grace-period", k.NodeMonitorGracePeriod, "a node whose lease is not renewed for this long becomes NotReady (Unknown)")
	fs.DurationVar(&k.NodeMonitorPeriod, "node-monitor-period", k.NodeMonitorPeriod, "how often node health and pod evictions are checked")
	fs.DurationVar(&k.ClusterSigningDuration, "cluster-signing-duration", k.ClusterSigningDuration, "longest lifetime of the certificates csrsigning issues")
	fs.StringSliceVar(&k.Controllers, "controllers", k.Controllers, "controllers to run (default: all)")
	fs.StringSliceVar(&c.Addons.Disabled, "disable", c.Addons.Disabled, "add-ons not to install, and to remove if installed: "+strings.Join(addons.Names, ","))
}

// Args returns the command line after `nodekit` that runs this server: CommandName, --data-dir, then
// FlagArgs.
func (c Config) Args() []string {
	return append([]string{CommandName, cli.Flag(cli.FlagDataDir), c.DataDir}, c.FlagArgs()...)
}

// FlagArgs returns the flags that make `nodekit server` run with c (zero settings taken as their
// defaults), as "--name=value" in BindFlags' order, each flag whose value differs from its default
// only. DataDir is not among them: it is the global --data-dir (see Args).
func (c Config) FlagArgs() []string {
	bound := DefaultConfig(c.DataDir)
	fs := pflag.NewFlagSet(CommandName, pflag.ContinueOnError)
	fs.SortFlags = false
	BindFlags(fs, &bound)
	// The flags point into bound: giving it c's settings makes every flag's value c's.
	bound = c.WithDefaults()
	var args []string
	fs.VisitAll(func(f *pflag.Flag) {
		v := f.Value.String()
		if v == f.DefValue {
			return
		}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(s.GetSlice(), ",") // String() is "[a,b]"; the flag parses "a,b"
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args
}
